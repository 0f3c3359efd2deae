//! Nested runs from a sandbox: a sandboxed program's `subpane run` goes to its worker through
//! the request socket (`$SUBPANE_NEST_SOCKET`), and the child runs in the real home, on the
//! same tmux server, sandboxed, never with more than its parent had.
//!
//! ```text
//!  test ─► subpane run --sandbox (parent) ─► bash ─► subpane run … (inside: a client)
//!                                                      │ one JSON request
//!          parent's worker ─ __nest ◄── nest.sock ─────┘
//!             └► plan (the parent's home, server, depth limit; a policy within the
//!                parent's) ─► the child, a run like any other ─► its envelope back
//! ```
//!
//! Each test plays the sandboxed program: what it may ask for, what it may not, and what a
//! hostile client sends over the socket by hand.
//!
//! Common pitfalls:
//! * The home lives outside `/tmp` ([`TestEnv::with_home_outside_tmp`]), as the default home
//!   does: a home under `/tmp` would be out of a sandbox's sight for another reason.
//! * What a nested command printed is kept in the parent's `out/` (`$SUBPANE_OUT_DIR`): the
//!   parent's `stdout.log` mixes it with the script's own lines.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::harness::shell_quote as q;
use crate::harness::{BIN, Ran, TestEnv, assert_valid_envelope, outside_the_sandbox};

const LIMIT: Duration = Duration::from_secs(90);
const HANG: &str = "a run with nested runs did not end";

fn qp(p: &Path) -> String {
    q(&p.display().to_string())
}

/// `run --json --run-id RUN --sandbox [extra] -- bash -c SCRIPT`, bounded in time; `$SP` in
/// the script is the subpane binary, `$O` the parent's artifact directory.
pub(crate) fn parent(env: &TestEnv, run: &str, extra: &[&str], script: &str) -> Ran {
    let script = format!("SP={}; O=\"$SUBPANE_OUT_DIR\"; {script}", q(BIN));
    let mut args = vec!["run", "--json", "--run-id", run, "--sandbox"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "bash", "-c", &script]);
    env.sp_within(LIMIT, HANG, &args)
}

pub(crate) fn stdout_log(env: &TestEnv, run: &str) -> String {
    std::fs::read_to_string(env.attempt_dir(run, 1).join("stdout.log")).unwrap_or_default()
}

/// A file the parent's script wrote to its `out/`.
pub(crate) fn out_file(env: &TestEnv, run: &str, name: &str) -> String {
    let p = env.attempt_dir(run, 1).join("out").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

pub(crate) fn spec(env: &TestEnv, run: &str) -> Value {
    env.read_json(&env.attempt_dir(run, 1).join("spec.json"))
}

fn paths(v: &Value) -> Vec<PathBuf> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|p| PathBuf::from(p.as_str().unwrap()))
        .collect()
}

fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}

#[test]
fn a_sandboxed_program_starts_a_nested_sandboxed_run_in_the_real_home() {
    let env = TestEnv::with_home_outside_tmp();
    std::fs::create_dir_all(env.work.join("sub")).unwrap();
    std::fs::create_dir_all(env.work.join("secret")).unwrap();
    std::fs::write(env.work.join("secret/key"), "TOP-SECRET").unwrap();
    let secret = env.work.join("secret").display().to_string();
    let script = "\
        $SP run --json --run-id child --cwd sub -- bash -c \
          'echo made > made-by-child; cat ../secret/key 2>/dev/null || echo secret-hidden' \
          >\"$O/child.json\" 2>\"$O/child.err\"; echo json_rc=$?; \
        $SP run --run-id human -- echo human-hello >\"$O/human.txt\" 2>&1; echo human_rc=$?";
    let r = parent(&env, "parent", &["--hide", &secret], script);
    assert_eq!(r.code, 0, "{r:?}");
    let log = stdout_log(&env, "parent");
    let err = out_file(&env, "parent", "child.err");
    assert!(log.contains("json_rc=0"), "{log}\nchild's stderr:\n{err}");
    assert!(log.contains("human_rc=0"), "{log}");

    // What `run --json` printed inside is the child's envelope, as recorded in the real home.
    let printed: Value = serde_json::from_str(&out_file(&env, "parent", "child.json")).unwrap();
    assert_valid_envelope(&printed);
    assert_eq!(printed, env.result("child"));
    assert_eq!(printed["status"], "completed", "{printed}");
    assert_eq!(printed["parent_run"], "parent", "{printed}");
    assert_eq!(printed["depth"], 1, "{printed}");
    assert_eq!(printed["sandbox"]["enabled"], true, "{printed}");
    // The human form is what `run` prints outside: the summary and the command's words.
    let human = out_file(&env, "parent", "human.txt");
    assert!(
        human.contains("run       human (attempt 1)") && human.contains("human-hello"),
        "{human}"
    );

    // The child wrote where it ran, and could not read what its parent could not.
    assert!(env.work.join("sub/made-by-child").exists());
    let child_out = std::fs::read_to_string(env.attempt_dir("child", 1).join("stdout.log"));
    assert!(child_out.unwrap().contains("secret-hidden"));
    // Its policy: the parent's writable tree (not a directory the parent could swap for a
    // link), the parent's hidden paths, no network.
    let s = spec(&env, "child");
    let sb = &s["sandbox"];
    assert_eq!(sb["enabled"], true);
    assert_eq!(sb["network"], "none");
    let writable = paths(&sb["writable"]);
    assert!(writable.contains(&real(&env.work)), "{sb}");
    assert!(!writable.contains(&real(&env.work.join("sub"))), "{sb}");
    assert!(
        paths(&sb["hidden"]).contains(&real(&env.work.join("secret"))),
        "{sb}"
    );
    assert_eq!(s["tmux"]["socket"], env.socket.display().to_string());

    // Seen from outside like any run: ls shows it under its parent.
    let rows = env.sp_within(LIMIT, HANG, ["ls", "--json"]).json();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == "child")
        .cloned()
        .unwrap_or_else(|| panic!("no child in {rows}"));
    assert_eq!(row["parent_run"], "parent", "{row}");
    env.assert_no_leftovers();
}

/// The `run` inside returns at once; the parent's program then waits for the child's mark
/// before it ends (a nested run ends with its parent's attempt: see `nest_bounds`).
#[test]
fn a_detached_nested_run_returns_at_once_and_is_waited_for_outside() {
    let env = TestEnv::with_home_outside_tmp();
    let script = "\
        $SP run --detach --json --run-id child -- bash -c 'echo detached-child; exec touch child-done' \
          >\"$O/started.json\" 2>\"$O/started.err\"; echo rc=$?; \
        i=0; while [ ! -e child-done ]; do \
          i=$((i+1)); [ $i -gt 1200 ] && { echo child-never-done; exit 9; }; sleep 0.05; \
        done";
    let r = parent(&env, "parent", &[], script);
    assert_eq!(r.code, 0, "{r:?}");
    let log = stdout_log(&env, "parent");
    let err = out_file(&env, "parent", "started.err");
    assert!(log.contains("rc=0"), "{log}\n{err}");
    let started: Value = serde_json::from_str(&out_file(&env, "parent", "started.json")).unwrap();
    assert_eq!(started["run_id"], "child", "{started}");
    assert_eq!(started["status"], "starting", "{started}");
    assert_eq!(
        real(Path::new(started["attempt_dir"].as_str().unwrap())),
        real(&env.attempt_dir("child", 1))
    );
    let w = env.sp_within(LIMIT, HANG, ["wait", "--json", "child"]);
    assert_eq!(w.code, 0, "{w:?}");
    let v = env.result("child");
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["parent_run"], "parent", "{v}");
    env.assert_no_leftovers();
}

/// Runs each `(name, arguments of run)` inside a sandboxed parent (with `extra`), and returns
/// each one's exit code and stderr.
fn ask_each(env: &TestEnv, extra: &[&str], cases: &[(&str, String)]) -> Vec<(String, i32, String)> {
    let mut script = String::new();
    for (name, args) in cases {
        script.push_str(&format!(
            "{args} 2>\"$O/{name}.err\" >/dev/null; echo \"{name}=$?\" >>\"$O/codes\"; "
        ));
    }
    let r = parent(env, "parent", extra, &script);
    assert_eq!(r.code, 0, "{r:?}");
    let codes = out_file(env, "parent", "codes");
    cases
        .iter()
        .map(|(name, _)| {
            let code = codes
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))
                .and_then(|c| c.parse().ok())
                .unwrap_or_else(|| panic!("no code for {name} in {codes}"));
            let err = out_file(env, "parent", &format!("{name}.err"));
            ((*name).to_owned(), code, err)
        })
        .collect()
}

#[test]
fn a_nested_run_may_not_ask_for_more_than_its_parent() {
    let env = TestEnv::with_home_outside_tmp();
    let outside = outside_the_sandbox("nest-outside-");
    let o = qp(outside.path());
    let cases: Vec<(&str, String)> = vec![
        ("full", "$SP run --run-id r1 --network full -- true".into()),
        (
            "allow",
            "$SP run --run-id r2 --network allow:example.com -- true".into(),
        ),
        (
            "writable",
            format!("$SP run --run-id r3 --writable {o} -- true"),
        ),
        ("cwd", format!("$SP run --run-id r4 --cwd {o} -- true")),
        (
            "tmp",
            "mkdir -p /tmp/inner && cd /tmp/inner && $SP run --run-id r5 -- true".into(),
        ),
        ("worktree", "$SP run --run-id r6 --worktree -- true".into()),
        (
            "preload",
            "$SP run --run-id r7 --env LD_PRELOAD=/x.so -- true".into(),
        ),
        (
            "pass",
            "LD_LIBRARY_PATH=/x $SP run --run-id r8 --env-pass LD_LIBRARY_PATH -- true".into(),
        ),
        ("home", format!("$SP --home {o} run --run-id r9 -- true")),
        ("ls", "$SP ls".into()),
        ("status", "$SP status parent".into()),
    ];
    let results = ask_each(&env, &[], &cases);
    let says = |name: &str, words: &[&str]| {
        let (_, code, err) = results.iter().find(|(n, _, _)| n == name).unwrap();
        assert_eq!(*code, 2, "{name}: {err}");
        for w in words {
            assert!(err.contains(w), "{name}: {w:?} missing from: {err}");
        }
    };
    says("full", &["network", "full", "none"]);
    says("allow", &["network", "none"]);
    says(
        "writable",
        &["not writable", &outside.path().display().to_string()],
    );
    says("cwd", &["not writable"]);
    says("tmp", &["/tmp/inner"]);
    says("worktree", &["--worktree"]);
    says("preload", &["LD_PRELOAD"]);
    says("pass", &["LD_LIBRARY_PATH"]);
    says("home", &["--home"]);
    says("ls", &["outside"]);
    says("status", &["outside"]);
    for i in 1..=9 {
        assert!(!env.run_dir(&format!("r{i}")).exists(), "r{i} was started");
    }
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
    env.assert_no_leftovers();
}

#[test]
fn a_nested_run_keeps_its_parents_allow_list_or_a_part_of_it() {
    let env = TestEnv::with_home_outside_tmp();
    let cases: Vec<(&str, String)> = vec![
        ("inherit", "$SP run --run-id same -- true".into()),
        (
            "other",
            "$SP run --run-id r1 --network allow:other.example.net -- true".into(),
        ),
        ("full", "$SP run --run-id r2 --network full -- true".into()),
    ];
    let results = ask_each(&env, &["--network", "allow:example.com"], &cases);
    let code = |name: &str| results.iter().find(|(n, _, _)| n == name).unwrap();
    assert_eq!(code("inherit").1, 0, "{:?}", code("inherit"));
    assert_eq!(code("other").1, 2, "{:?}", code("other"));
    assert!(
        code("other").2.contains("other.example.net"),
        "{:?}",
        code("other")
    );
    assert_eq!(code("full").1, 2, "{:?}", code("full"));
    let s = spec(&env, "same");
    assert_eq!(
        s["sandbox"]["network"],
        serde_json::json!({"allow": ["example.com"]})
    );
    assert!(!env.run_dir("r1").exists() && !env.run_dir("r2").exists());
    env.assert_no_leftovers();
}

/// A client that is not `subpane`: garbage, a request past the bound, fields the request does
/// not have, and a request that asks for no sandbox in another home and tmux server.
#[test]
fn a_hostile_client_on_the_socket_gets_refusals_and_never_its_own_home_or_policy() {
    let env = TestEnv::with_home_outside_tmp();
    crate::harness::require_tool("python3", &["--version"], "python3");
    let other_home = outside_the_sandbox("nest-other-home-");
    let py = format!(
        r#"
import json, os, socket
p = os.environ["SUBPANE_NEST_SOCKET"]
def ask(data, waited=False):
    s = socket.socket(socket.AF_UNIX)
    s.connect(p)
    try:
        s.sendall(data)
        # A waited run is given up when the write side closes: it stays open to the end.
        if not waited:
            s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    out = b""
    try:
        while not (waited and b'"finished"' in out):
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError:
        pass
    return out.decode(errors="replace").strip().replace("\n", " | ")
def req(r, **more):
    d = {{"request": r, "cwd": os.getcwd(), "vars": {{"PATH": os.environ["PATH"]}}, "detach": True}}
    d.update(more)
    return json.dumps(d).encode() + b"\n"
print("GARBAGE", ask(b"this is not json\n"))
print("HUGE", ask(b"x" * (8 << 20)))
print("UNKNOWN", ask(req({{"argv": ["true"], "run_id": "u"}}, home="/elsewhere")))
# A NUL byte would end one variable and begin another in the child's environment file.
print("NUL_ENV", ask(req({{"argv": ["true"], "run_id": "n1", "env": {{"A": "x\u0000LD_PRELOAD=/x.so"}}}})))
print("NUL_VAR", ask(req({{"argv": ["true"], "run_id": "n2"}},
    vars={{"PATH": os.environ["PATH"], "LANG": "C\u0000LD_PRELOAD=/x.so"}})))
# Waited for: a detached run would end with this attempt, which ends right after.
print("FORCED", ask(req({{"argv": ["true"], "run_id": "forced", "sandbox": False}},
    vars={{"PATH": os.environ["PATH"], "SUBPANE_HOME": {home},
          "SUBPANE_TMUX_SOCKET": "/tmp/other.sock", "SUBPANE_RUN_ID": "nobody",
          "SUBPANE_DEPTH": "0", "SUBPANE_MAX_DEPTH": "99"}}, detach=False), waited=True))
"#,
        home = serde_json::to_string(&other_home.path().display().to_string()).unwrap()
    );
    let script = format!("python3 -c {} >\"$O/replies\" 2>&1; echo py_rc=$?", q(&py));
    let r = parent(&env, "parent", &[], &script);
    assert_eq!(r.code, 0, "{r:?}");
    let replies = out_file(&env, "parent", "replies");
    let line = |tag: &str| {
        replies
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{tag} ")))
            .unwrap_or_else(|| panic!("no {tag} reply in {replies}"))
            .to_owned()
    };
    assert!(line("GARBAGE").contains("refused"), "{replies}");
    assert!(
        line("HUGE").contains("refused") && line("HUGE").contains("MiB"),
        "{replies}"
    );
    assert!(line("UNKNOWN").contains("home"), "{replies}");
    assert!(!env.run_dir("u").exists());
    for tag in ["NUL_ENV", "NUL_VAR"] {
        assert!(
            line(tag).contains("refused") && line(tag).contains("NUL"),
            "{tag}: {replies}"
        );
    }
    assert!(!env.run_dir("n1").exists() && !env.run_dir("n2").exists());
    assert!(line("FORCED").contains("started"), "{replies}");
    // The forced request ran sandboxed, in this home, on this server, below its parent.
    let w = env.sp_within(LIMIT, HANG, ["wait", "--json", "forced"]);
    assert_eq!(w.code, 0, "{w:?}");
    let s = spec(&env, "forced");
    assert_eq!(s["sandbox"]["enabled"], true, "{s}");
    assert_eq!(s["tmux"]["socket"], env.socket.display().to_string());
    assert_eq!(s["lineage"]["parent_run"], "parent", "{s}");
    assert!(
        std::fs::read_dir(other_home.path())
            .unwrap()
            .next()
            .is_none()
    );
    env.assert_no_leftovers();
}

#[test]
fn a_nested_run_is_cancelled_when_its_client_is_killed() {
    let env = TestEnv::with_home_outside_tmp();
    // The inner client waits for its run; the script kills it (SIGKILL: no chance to say
    // goodbye) once the child's program runs.
    let script = format!("{CHILD_IN_THE_BACKGROUND} kill -9 $C; wait $C; echo client_rc=$?");
    let r = parent(&env, "parent", &[], &script);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(stdout_log(&env, "parent").contains("client_rc=137"));
    assert_child_cancelled(&env);
}

/// A script's start: `run` a child that sleeps, in the background (its client's pid in `$C`),
/// and wait until the child's program runs.
const CHILD_IN_THE_BACKGROUND: &str = "\
    $SP run --run-id child -- bash -c 'touch child-started; exec sleep 60' & C=$!; \
    i=0; while [ ! -e child-started ]; do \
      i=$((i+1)); [ $i -gt 600 ] && { echo child-never-started; exit 9; }; sleep 0.05; \
    done;";

/// The child of [`CHILD_IN_THE_BACKGROUND`] ends cancelled (a child left running would make
/// this wait time out), and nothing is left.
fn assert_child_cancelled(env: &TestEnv) {
    let w = env.sp_within(LIMIT, HANG, ["wait", "--json", "--timeout", "30s", "child"]);
    let v = w.json();
    assert_eq!(v["status"], "cancelled", "{v}");
    assert_eq!(v["parent_run"], "parent", "{v}");
    env.assert_no_leftovers();
}

/// a (`--max-depth 1`) starts b, which asks for a deeper limit and starts c: refused, also when
/// c's client lost every variable (`env -i`).
#[test]
fn the_depth_limit_holds_through_nested_sandboxes() {
    let env = TestEnv::with_home_outside_tmp();
    let inner = "$SP run --run-id c -- true; echo c_rc=$?; \
                 env -i PATH=\"$PATH\" $SP run --run-id c2 -- true; echo c2_rc=$?";
    let script = format!(
        "$SP run --run-id b --max-depth 5 -- bash -c {} 2>\"$O/b.err\"; echo b_rc=$?",
        q(&format!("SP={}; {inner}", q(BIN)))
    );
    let r = parent(&env, "a", &["--max-depth", "1"], &script);
    assert_eq!(r.code, 0, "{r:?}");
    let a_out = stdout_log(&env, "a");
    assert!(
        a_out.contains("b_rc=0"),
        "{a_out}\n{}",
        out_file(&env, "a", "b.err")
    );
    let b_out = stdout_log(&env, "b");
    assert!(
        b_out.contains("c_rc=2") && b_out.contains("c2_rc=2"),
        "{b_out}"
    );
    let b_err = std::fs::read_to_string(env.attempt_dir("b", 1).join("stderr.log")).unwrap();
    assert!(
        b_err.contains("at most 1 deep") && b_err.contains("a > b > c"),
        "{b_err}"
    );
    assert!(!env.run_dir("c").exists() && !env.run_dir("c2").exists());
    let b = env.result("b");
    assert_eq!(b["parent_run"], "a");
    assert_eq!(b["depth"], 1);
    assert_eq!(spec(&env, "b")["max_depth"], 1);
    env.assert_no_leftovers();
}

/// The sandboxed program is itself `env -i subpane run …`: no variable names the socket, and
/// its parent is the worker, whose spec the sandbox hides. It still reaches the worker.
#[test]
fn a_bare_client_whose_parent_is_the_worker_still_reaches_it() {
    let env = TestEnv::with_home_outside_tmp();
    let path = std::env::var("PATH").unwrap_or_default();
    let r = env.sp_within(
        LIMIT,
        HANG,
        [
            "run",
            "--json",
            "--run-id",
            "parent",
            "--sandbox",
            "--",
            "env",
            "-i",
            &format!("PATH={path}"),
            BIN,
            "run",
            "--json",
            "--run-id",
            "child",
            "--",
            "true",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let child = env.result("child");
    assert_eq!(child["status"], "completed", "{child}");
    assert_eq!(child["parent_run"], "parent", "{child}");
    env.assert_no_leftovers();
}

/// The parent's program ends while a `run` it left in the background still waits for its
/// child: the attempt's end cancels the child (the client is one of the leftovers killed).
#[test]
fn a_waited_nested_run_is_cancelled_when_its_parent_attempt_ends() {
    let env = TestEnv::with_home_outside_tmp();
    let script = format!("{CHILD_IN_THE_BACKGROUND} echo parent-done");
    let r = parent(&env, "parent", &[], &script);
    assert_eq!(r.code, 0, "{r:?}");
    assert_child_cancelled(&env);
}

/// The parent's program names a state directory of its own making for a nested agent, with a
/// link in it to a file the parent's sandbox hides. Seeding happens outside the sandbox: the
/// child is seeded from what its parent's agent was seeded from (the user's), never from it.
#[test]
fn a_nested_agent_is_never_seeded_from_a_directory_the_parents_program_names() {
    let env = TestEnv::with_home_outside_tmp();
    let hidden = outside_the_sandbox("nest-seed-");
    let secret = hidden.path().join("secret");
    std::fs::write(&secret, "TOP-SECRET-SEED").unwrap();
    let script = format!(
        "mkdir -p \"$O/fake\" bin && ln -s {s} \"$O/fake/settings.json\" && \
         printf '#!/bin/sh\\nexit 0\\n' > bin/claude && chmod +x bin/claude && \
         CLAUDE_CONFIG_DIR=$O/fake PATH=$PWD/bin:$PATH \
         $SP run --json --run-id child --agent claude --task hi > \"$O/child.json\"; echo done",
        s = qp(&secret)
    );
    let hide = hidden.path().display().to_string();
    let r = parent(&env, "parent", &["--hide", &hide], &script);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        env.run_dir("child").exists(),
        "no child: {}\n{}",
        stdout_log(&env, "parent"),
        std::fs::read_to_string(env.attempt_dir("parent", 1).join("stderr.log"))
            .unwrap_or_default()
    );
    let child = spec(&env, "child");
    let state = &child["sandbox"]["agent_state"];
    let seeded = state["seeded_from"].as_str().unwrap_or_default();
    let parents = env.attempt_dir("parent", 1).join("out");
    assert!(
        !Path::new(seeded).starts_with(&parents),
        "seeded from the parent's own directory: {state}"
    );
    let copied = env.attempt_dir("child", 1).join("agent/settings.json");
    let got = std::fs::read_to_string(&copied).unwrap_or_default();
    assert!(
        !got.contains("TOP-SECRET"),
        "the hidden file was copied in: {got}"
    );
    env.assert_no_leftovers();
}
