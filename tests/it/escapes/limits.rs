//! Resources: a sandboxed program runs under limits on processes, memory (its private /tmp
//! included) and file size; the envelope says what was enforced and how, and an attempt that
//! failed at a limit says so (`failure_kind: "resource_limit"`).

use super::*;

/// `run --json --sandbox LIMITS -- python3 -c PROGRAM`.
fn limited(env: &TestEnv, run: &str, limits: &[&str], program: &str) -> (Ran, serde_json::Value) {
    let mut args = vec!["--sandbox"];
    args.extend_from_slice(limits);
    let r = run_bash(
        env,
        run,
        &args,
        &format!("exec python3 -c {}", shell_quote(program)),
    );
    let v = r.json();
    crate::harness::assert_valid_envelope(&v);
    (r, v)
}

/// Forks until the kernel refuses, each child sleeping; says how many it made.
const FORK_BOMB: &str = r#"
import os, sys, time
n = 0
for _ in range(1000):
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
    except OSError:
        break
print("forked", n, flush=True)
sys.exit(3)
"#;

#[test]
fn a_fork_bomb_stops_at_the_process_limit_and_the_attempt_says_so() {
    crate::harness::require_tool("python3", &["--version"], "python3");
    let env = TestEnv::with_home_outside_tmp();
    let (r, v) = limited(&env, "bomb", &["--max-procs", "300"], FORK_BOMB);
    assert_eq!(r.code, 1, "{r:?}");
    let out = stdout_log(&env, "bomb", 1);
    let n: u32 = out
        .trim()
        .strip_prefix("forked ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        (200..300).contains(&n),
        "{n} processes under a limit of 300"
    );
    assert_eq!(v["failure_kind"], "resource_limit", "{v}");
    assert_eq!(v["sandbox"]["limit_hit"], "processes", "{v}");
    let l = &v["sandbox"]["enforced"]["limits"];
    assert_eq!(
        l["processes"],
        json!({"max": 300, "by": "pid_namespace"}),
        "{l}"
    );
    // Nothing of the bomb outlives the attempt.
    env.assert_no_leftovers();
}

#[test]
fn memory_tmp_and_file_size_are_limited_and_named() {
    crate::harness::require_tool("python3", &["--version"], "python3");
    let env = TestEnv::with_home_outside_tmp();
    // Memory: one process may not allocate past the limit.
    let grab = r#"
try:
    b = bytearray(400 << 20)
    print("ALLOCATED")
except MemoryError:
    print("refused")
"#;
    let (r, v) = limited(&env, "mem", &["--max-memory", "200M"], grab);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(stdout_log(&env, "mem", 1).trim(), "refused");
    let l = &v["sandbox"]["enforced"]["limits"];
    assert_eq!(
        l["memory_bytes"],
        json!({"max": 200 << 20, "by": "rlimit_data"}),
        "{l}"
    );

    // The private /tmp is a tmpfs of the size given: filling it fails, and the attempt says
    // the limit was reached.
    let fill = r#"
import sys
try:
    with open("/tmp/fill", "wb") as f:
        f.write(b"x" * (8 << 20))
    print("WROTE")
except OSError as e:
    print("refused", e.errno)
    sys.exit(1)
"#;
    let (r, v) = limited(&env, "tmp", &["--max-tmp", "4M"], fill);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(stdout_log(&env, "tmp", 1).trim(), "refused 28");
    assert_eq!(v["failure_kind"], "resource_limit", "{v}");
    assert_eq!(v["sandbox"]["limit_hit"], "tmp", "{v}");

    // A file past the file size limit: the writer is killed by SIGXFSZ (a program that
    // ignores the signal, as Python does, gets EFBIG instead).
    let args = ["--sandbox", "--max-file-size", "1M"];
    let r = run_bash(&env, "fsize", &args, "exec head -c 4M /dev/zero > big.bin");
    let v = r.json();
    crate::harness::assert_valid_envelope(&v);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(v["signal"], "SIGXFSZ", "{v}");
    assert_eq!(v["failure_kind"], "resource_limit", "{v}");
    assert_eq!(v["sandbox"]["limit_hit"], "file_size", "{v}");
    assert_eq!(
        std::fs::metadata(env.work.join("big.bin")).unwrap().len(),
        1 << 20
    );
    let big = r#"
with open("big.bin", "wb") as f:
    f.write(b"x" * (4 << 20))
print("WROTE")
"#;

    // Control: the defaults let all three through, and say what they were.
    let all = format!("{grab}\n{}\n{}", fill.replace("sys.exit(1)", "pass"), big);
    let (r, v) = limited(&env, "defaults", &[], &all);
    assert_eq!(r.code, 0, "{r:?}");
    let out = stdout_log(&env, "defaults", 1);
    assert_eq!(
        out.matches("ALLOCATED").count() + out.matches("WROTE").count(),
        3,
        "{out}"
    );
    let l = &v["sandbox"]["enforced"]["limits"];
    assert_eq!(
        l["tmp_bytes"],
        json!({"max": 2u64 << 30, "by": "tmpfs"}),
        "{l}"
    );
    assert_eq!(l["processes"]["max"], 4096, "{l}");
    assert!(v["sandbox"].get("limit_hit").is_none(), "{v}");
    env.assert_no_leftovers();
}

#[test]
fn limits_are_sandbox_settings_checked_before_anything_starts() {
    let env = TestEnv::new();
    for (args, says) in [
        (vec!["--max-procs", "300"], "add --sandbox"),
        (
            vec!["--sandbox", "--max-procs", "10"],
            "--max-procs 10 is out of range",
        ),
        (
            vec!["--sandbox", "--max-memory", "lots"],
            "--max-memory `lots` is not a size",
        ),
        (vec!["--sandbox", "--max-tmp", "0"], "greater than zero"),
        (
            vec!["--sandbox", "--max-file-size", "1.5G"],
            "--max-file-size",
        ),
    ] {
        let mut full = vec!["run"];
        full.extend(args.iter().copied());
        full.extend(["--", "true"]);
        let r = env.sp(&full);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
    }
    assert!(no_runs(&env));
}
