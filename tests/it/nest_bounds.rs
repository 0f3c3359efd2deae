//! A nested run is bounded by its parent: it ends when its parent's attempt ends (detached or
//! not, however the parent ends: completed, timed out, its worker killed), an attempt has at
//! most 16 live nested runs, and its `--max-procs` and `--max-tmp` are a budget its live
//! nested runs take their grants from.
//!
//! ```text
//!  parent (sandboxed) ─ subpane run --detach … ─► child ─ its worker watches the parent's
//!     │ ends (exit, --timeout, SIGKILL of its worker)            worker (a pidfd)
//!     └──────────────────────────────────────────────────────► child cancelled
//! ```
//!
//! Each test plays the sandboxed program that tries to outlive or outgrow its parent.
//!
//! Common pitfalls:
//! * A child that is left running (the old behaviour) must not outlive the test: a failed
//!   wait cancels it before the assertion fails ([`child_ends`]).
//! * What the parent's program sees of its own limits (`/proc/sys/kernel/pid_max`, the size
//!   of its `/tmp`) is written to its `out/`, read after it ended.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::harness::shell_quote as q;
use crate::harness::{BIN, TestEnv, send_signal, wait_until};
use crate::nest::{out_file, parent, spec, stdout_log};

const LIMIT: Duration = Duration::from_secs(120);
const HANG: &str = "a run with nested runs did not end";

/// A detached child (`run-id`) that marks its start in the workspace and sleeps; `$SP` and
/// `$O` as in [`parent`]. Waits (bounded) until it runs.
fn detached_sleeper(run_id: &str, extra: &str) -> String {
    format!(
        "$SP run --detach --run-id {run_id} {extra} -- bash -c \
           'touch {run_id}-started; exec sleep 300' >\"$O/{run_id}.out\" 2>\"$O/{run_id}.err\"; \
         echo {run_id}_rc=$?; \
         i=0; while [ ! -e {run_id}-started ]; do \
           i=$((i+1)); [ $i -gt 1200 ] && {{ echo {run_id}-never-started; exit 9; }}; sleep 0.05; \
         done; "
    )
}

/// Waits (at most 30 s) for `run` to end and returns its envelope. A run still going then is
/// cancelled first, so a failing test leaves nothing behind.
fn child_ends(env: &TestEnv, run: &str) -> Value {
    let w = env.sp_within(LIMIT, HANG, ["wait", "--json", "--timeout", "30s", run]);
    if w.code == 3 {
        let _ = env.sp_within(LIMIT, HANG, ["cancel", "--grace", "0s", run]);
        let _ = env.sp_within(LIMIT, HANG, ["wait", "--timeout", "30s", run]);
        panic!("{run} outlived its parent's attempt: {w:?}");
    }
    w.json()
}

fn assert_cancelled_by_its_parents_end(v: &Value) {
    assert_eq!(v["status"], "cancelled", "{v}");
    assert_eq!(v["parent_run"], "parent", "{v}");
    assert_eq!(v["cancelled_by"], "parent", "{v}");
    let errors = v["output"]["errors"].to_string();
    assert!(errors.contains("parent"), "{v}");
}

#[test]
fn a_detached_nested_run_ends_when_its_parent_times_out() {
    let env = TestEnv::with_home_outside_tmp();
    let script = format!("{} exec sleep 300", detached_sleeper("child", ""));
    let r = parent(&env, "parent", &["--timeout", "10s"], &script);
    assert_eq!(r.code, 124, "{r:?}\n{}", stdout_log(&env, "parent"));
    assert!(
        stdout_log(&env, "parent").contains("child_rc=0"),
        "{}\n{}",
        stdout_log(&env, "parent"),
        out_file(&env, "parent", "child.err")
    );
    assert_cancelled_by_its_parents_end(&child_ends(&env, "child"));
    env.assert_no_leftovers();
}

/// The parent completes while its detached child sleeps: the child is cancelled. Retried from
/// outside afterwards, the child is a run of its own: it is not bound to the ended parent.
#[test]
fn a_detached_nested_run_ends_when_its_parent_completes_and_a_retry_is_a_run_of_its_own() {
    let env = TestEnv::with_home_outside_tmp();
    let program = "[ -e go-on ] && exit 0; touch child-started; exec sleep 300";
    let script = format!(
        "$SP run --detach --run-id child -- bash -c {} >\"$O/child.out\" 2>\"$O/child.err\"; \
         i=0; while [ ! -e child-started ]; do \
           i=$((i+1)); [ $i -gt 1200 ] && {{ echo never-started; exit 9; }}; sleep 0.05; \
         done; echo parent-done",
        q(program)
    );
    let r = parent(&env, "parent", &[], &script);
    assert_eq!(r.code, 0, "{r:?}\n{}", stdout_log(&env, "parent"));
    assert_cancelled_by_its_parents_end(&child_ends(&env, "child"));

    std::fs::write(env.work.join("go-on"), "").unwrap();
    let again = env.sp_within(LIMIT, HANG, ["retry", "--json", "child"]);
    assert_eq!(again.code, 0, "{again:?}");
    let v = again.json();
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["attempt"], 2, "{v}");
    let s = env.read_json(&env.attempt_dir("child", 2).join("spec.json"));
    assert!(s.get("within").is_none_or(Value::is_null), "{s}");
    env.assert_no_leftovers();
}

/// The parent's worker and its server of nested runs are killed outright (SIGKILL: neither
/// can say anything): the child's own worker sees the parent's worker gone and stops.
#[test]
fn a_nested_run_is_stopped_when_its_parents_worker_is_killed() {
    let env = TestEnv::with_home_outside_tmp();
    let script = format!(
        "SP={}; O=\"$SUBPANE_OUT_DIR\"; {} exec sleep 300",
        q(BIN),
        detached_sleeper("child", "")
    );
    let started = env.sp_within(
        LIMIT,
        HANG,
        [
            "run",
            "--detach",
            "--json",
            "--run-id",
            "parent",
            "--sandbox",
            "--",
            "bash",
            "-c",
            &script,
        ],
    );
    assert_eq!(started.code, 0, "{started:?}");
    let marker = env.work.join("child-started");
    wait_until("the nested run's program to start", || {
        marker.exists().then_some(())
    });
    let worker = env.worker_pid("parent");
    let server = nest_server_of(&env.attempt_dir("parent", 1));
    send_signal(server, libc::SIGKILL);
    send_signal(worker, libc::SIGKILL);
    assert_cancelled_by_its_parents_end(&child_ends(&env, "child"));
    // The parent is lost; an observer ends what is left of it.
    let w = env.sp_within(
        LIMIT,
        HANG,
        ["wait", "--json", "--timeout", "30s", "parent"],
    );
    assert_eq!(w.json()["failure_kind"], "lost", "{w:?}");
    env.assert_no_leftovers();
}

/// The pid of `subpane __nest … DIR`, the server of the attempt in `dir`.
fn nest_server_of(dir: &Path) -> i32 {
    let dir = dir.as_os_str().as_encoded_bytes().to_vec();
    wait_until("the server of nested runs", || {
        std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
            (args.get(1) == Some(&b"__nest".as_slice()) && args.contains(&dir.as_slice()))
                .then_some(pid)
        })
    })
}

/// Sixteen nested runs live at once; the seventeenth is refused (exit 2), saying the limit
/// and how many are live.
#[test]
fn an_attempt_has_at_most_sixteen_live_nested_runs() {
    let env = TestEnv::with_home_outside_tmp();
    let mut script = String::new();
    for i in 1..=16 {
        script.push_str(&detached_sleeper(
            &format!("c{i}"),
            "--max-procs 300 --max-tmp 1M",
        ));
    }
    script.push_str(
        "$SP run --run-id c17 --max-procs 300 --max-tmp 1M -- true 2>\"$O/c17.err\"; \
         echo c17_rc=$?",
    );
    let r = parent(&env, "parent", &["--max-procs", "6000"], &script);
    assert_eq!(r.code, 0, "{r:?}");
    let log = stdout_log(&env, "parent");
    for i in 1..=16 {
        assert!(log.contains(&format!("c{i}_rc=0")), "c{i}: {log}");
    }
    let err = out_file(&env, "parent", "c17.err");
    assert!(log.contains("c17_rc=2"), "{log}\n{err}");
    assert!(
        err.contains("at most 16") && err.contains("16 are live"),
        "{err}"
    );
    assert!(!env.run_dir("c17").exists());
    for i in 1..=16 {
        let v = child_ends(&env, &format!("c{i}"));
        assert_eq!(v["status"], "cancelled", "{v}");
    }
    env.assert_no_leftovers();
}

/// The parent's `--max-procs 1200 --max-tmp 64M` is shared with its live nested runs: what a
/// child is granted, the parent loses while the child lives (the kernel's limits of both
/// sandboxes say so), a grant beyond what the parent can spare is refused, and what a child
/// held comes back when it ends.
#[test]
fn a_nested_runs_grant_comes_out_of_its_parents_limits_and_goes_back() {
    let env = TestEnv::with_home_outside_tmp();
    // What a program sees of its own limits: its PID namespace's pid_max (the limit plus
    // one) and the size of its /tmp.
    let own = |name: &str| {
        format!(
            "cat /proc/sys/kernel/pid_max > \"$O/{name}.pids\"; \
             df -B1 --output=size /tmp | tail -1 | tr -d ' ' > \"$O/{name}.tmp\"; "
        )
    };
    let script = format!(
        "{a} {p1} \
         $SP run --run-id b --max-procs 600 -- true 2>\"$O/b.err\"; echo b_rc=$?; \
         $SP run --run-id c --max-tmp 40M -- true 2>\"$O/c.err\"; echo c_rc=$?; \
         $SP run --run-id d -- bash -c {d} 2>\"$O/d.err\"; echo d_rc=$?; \
         {p2}",
        a = detached_sleeper("a", "--max-procs 600 --max-tmp 32M"),
        p1 = own("p1"),
        p2 = own("p2"),
        d = q(&format!(
            "cat /proc/sys/kernel/pid_max > {w}/d.pids; \
             df -B1 --output=size /tmp | tail -1 | tr -d ' ' > {w}/d.tmp",
            w = env.work.display()
        )),
    );
    let r = parent(
        &env,
        "parent",
        &["--max-procs", "1200", "--max-tmp", "64M"],
        &script,
    );
    assert_eq!(r.code, 0, "{r:?}");
    let log = stdout_log(&env, "parent");
    assert!(
        log.contains("a_rc=0"),
        "{log}\n{}",
        out_file(&env, "parent", "a.err")
    );
    let num = |s: String| -> u64 {
        s.trim()
            .parse()
            .unwrap_or_else(|e| panic!("not a number: {s:?}: {e}"))
    };
    let mib = 1 << 20;

    // While a (600 processes, 32 MiB) lives, the parent has the rest.
    let a = spec(&env, "a");
    assert_eq!(a["sandbox"]["limits"]["processes"], 600, "{a}");
    assert_eq!(a["sandbox"]["limits"]["tmp_bytes"], 32 * mib, "{a}");
    assert_eq!(num(out_file(&env, "parent", "p1.pids")), 600 + 1);
    assert_eq!(num(out_file(&env, "parent", "p1.tmp")), 32 * mib);

    // Beyond what the parent can spare: refused, saying what it can.
    for (run, flag) in [("b", "--max-procs 600"), ("c", "--max-tmp 40M")] {
        let err = out_file(&env, "parent", &format!("{run}.err"));
        assert!(log.contains(&format!("{run}_rc=2")), "{run}: {log}\n{err}");
        assert!(err.contains(flag) && err.contains("spare"), "{run}: {err}");
        assert!(!env.run_dir(run).exists(), "{run} was started");
    }

    // Asking for nothing, d gets an eighth of the parent's limits, at least 300 processes.
    assert!(
        log.contains("d_rc=0"),
        "{log}\n{}",
        out_file(&env, "parent", "d.err")
    );
    let d = spec(&env, "d");
    assert_eq!(d["sandbox"]["limits"]["processes"], 300, "{d}");
    assert_eq!(d["sandbox"]["limits"]["tmp_bytes"], 8 * mib, "{d}");
    let read = |name: &str| num(std::fs::read_to_string(env.work.join(name)).unwrap());
    assert_eq!(read("d.pids"), 300 + 1);
    assert_eq!(read("d.tmp"), 8 * mib);

    // d ended: its grant came back (a still holds its own).
    assert_eq!(num(out_file(&env, "parent", "p2.pids")), 600 + 1);
    assert_eq!(num(out_file(&env, "parent", "p2.tmp")), 32 * mib);

    let v = child_ends(&env, "a");
    assert_eq!(v["status"], "cancelled", "{v}");
    env.assert_no_leftovers();
}
