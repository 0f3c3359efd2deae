//! `subpane run -- PROGRAM`: the attempt directory, how the program is started, what is
//! recorded (and what must never be), exit codes, `--json` and `--detach`.

use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::harness::{TestEnv, assert_valid_envelope, fixture, require_tool, wait_until};

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `reports_itself.sh`, which asks `ps` for its process group.
fn reports_itself() -> std::path::PathBuf {
    require_tool("ps", &["-o", "pgid=", "-p", "1"], "procps");
    fixture("reports_itself.sh")
}

/// `KEY=VALUE` lines printed by `reports_itself.sh`.
fn facts(stdout_log: &[u8]) -> std::collections::HashMap<String, String> {
    String::from_utf8_lossy(stdout_log)
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect()
}

fn ts(v: &Value) -> std::time::SystemTime {
    humantime::parse_rfc3339(v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}"))).unwrap()
}

#[test]
fn run_creates_the_attempt_directory_with_every_file() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--json",
        "--run-id",
        "files",
        "--",
        fixture("mixed_output.sh").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    let dir = env.attempt_dir("files", 1);
    assert!(env.run_dir("files").join("run.json").is_file());
    for f in [
        "spec.json",
        "events.jsonl",
        "stdout.log",
        "stderr.log",
        "worker.json",
        "result.json",
        "launch.json",
    ] {
        assert!(dir.join(f).is_file(), "{f} is missing in {}", dir.display());
    }
    // JSON objects and arrays are events, byte for byte; stdout.log has every line in order.
    assert_eq!(
        std::fs::read_to_string(dir.join("events.jsonl")).unwrap(),
        "{\"type\":\"start\",\"n\":1}\n[\"an\",\"array\"]\n{\"type\":\"end\",\"n\":2}\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("stdout.log")).unwrap(),
        "{\"type\":\"start\",\"n\":1}\nhello from stdout\n[\"an\",\"array\"]\n\
         second text line\n{\"type\":\"end\",\"n\":2}\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("stderr.log")).unwrap(),
        "oops on stderr\nsecond stderr line\n"
    );
    assert_eq!(v["filter"]["kept_lines"], 3);
    // The printed envelope is result.json.
    assert_eq!(env.result("files"), v);
    assert_eq!(v["run_id"], "files");
    assert_eq!(v["attempt"], 1);
    assert_eq!(v["agent"], "command");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["failure_kind"], Value::Null);
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["argv"][0], fixture("mixed_output.sh").to_str().unwrap());
    // The one-shot environment file is gone (it became worker.json, whose first version is
    // kept), and no temp file of an atomic write is left.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with('.') && n != ".worker-running.json"),
        "leftover hidden/temp files: {names:?}"
    );
    assert_eq!(
        env.read_json(&dir.join(".worker-running.json"))["state"],
        "running"
    );
    assert_eq!(env.read_json(&dir.join("worker.json"))["state"], "finished");
    let runs: Vec<_> = std::fs::read_dir(env.run_dir("files"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        !runs.iter().any(|n| n.to_string_lossy().starts_with('.')),
        "temp files in the run dir: {runs:?}"
    );
    // tmux facts are filled in.
    assert_eq!(v["tmux"]["socket"], env.socket.to_str().unwrap());
    assert_eq!(v["tmux"]["session"], "files-1");
    assert!(
        v["tmux"]["pane_id"]
            .as_str()
            .is_some_and(|p| p.starts_with('%')),
        "{}",
        v["tmux"]
    );
    env.assert_no_leftovers();
}

#[test]
fn artifacts_list_every_file_with_its_size_and_sha256() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--json",
        "--run-id",
        "arts",
        "--",
        fixture("mixed_output.sh").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    let dir = env.attempt_dir("arts", 1);
    let arts = v["artifacts"].as_array().unwrap();
    let listed: Vec<&str> = arts.iter().map(|a| a["path"].as_str().unwrap()).collect();
    // Every artifact file that exists is listed (no prompt.txt or output.txt for commands).
    assert_eq!(
        listed,
        [
            "spec.json",
            "events.jsonl",
            "stdout.log",
            "stderr.log",
            "worker.json"
        ]
    );
    let kinds: Vec<&str> = arts.iter().map(|a| a["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["spec", "events", "stdout", "stderr", "worker"]);
    for a in arts {
        let bytes = std::fs::read(dir.join(a["path"].as_str().unwrap())).unwrap();
        assert_eq!(a["bytes"], bytes.len() as u64, "{a}");
        assert_eq!(a["sha256"], sha256_hex(&bytes), "{a}");
    }
    assert!(
        arts.iter()
            .any(|a| a["path"] == "events.jsonl" && a["bytes"].as_u64() > Some(0))
    );
}

#[test]
fn timestamps_and_duration_are_consistent() {
    let env = TestEnv::new();
    let before = std::time::SystemTime::now();
    let r = env.sp(["run", "--json", "--", "bash", "-c", "sleep 0.3"]);
    let after = std::time::SystemTime::now();
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    let (s, f) = (ts(&v["started_at"]), ts(&v["finished_at"]));
    // RFC 3339 UTC with milliseconds.
    let started = v["started_at"].as_str().unwrap();
    assert!(
        started.ends_with('Z') && started.len() == "2026-11-30T03:39:43.130Z".len(),
        "{started}"
    );
    let slack = std::time::Duration::from_millis(5);
    assert!(before - slack <= s && s <= f && f <= after + slack, "{v}");
    let d = v["duration_ms"].as_u64().unwrap();
    assert!((300..10_000).contains(&d), "duration_ms {d}");
    let between = f.duration_since(s).unwrap().as_millis() as u64;
    assert!(
        d.abs_diff(between) <= 1,
        "duration_ms {d} vs finished-started {between}"
    );
}

#[test]
fn program_runs_in_its_own_process_group_with_stdin_from_dev_null() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--json",
        "--run-id",
        "me",
        "--",
        reports_itself().to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_valid_envelope(&r.json());
    let f = facts(&std::fs::read(env.attempt_dir("me", 1).join("stdout.log")).unwrap());
    assert_eq!(
        f["pgid"], f["pid"],
        "the program leads its own process group: {f:?}"
    );
    let worker: Value = env.read_json(&env.attempt_dir("me", 1).join("worker.json"));
    assert_eq!(
        worker["agent"]["pid"].as_i64().unwrap().to_string(),
        f["pid"]
    );
    assert_ne!(
        worker["worker"]["pid"].as_i64().unwrap().to_string(),
        f["pgid"]
    );
    assert_eq!(f["stdin"], "/dev/null");
    assert_eq!(f["stdin_read"], "eof");
    assert_eq!(
        f["tmux"], "unset",
        "TMUX is removed from the program's environment"
    );
    env.assert_no_leftovers();
}

#[test]
fn cwd_flag_sets_the_working_directory() {
    let env = TestEnv::new();
    let sub = env.work.join("sub dir");
    std::fs::create_dir(&sub).unwrap();
    let r = env
        .cmd()
        .args(["run", "--json", "--run-id", "cwd", "--cwd"])
        .arg(&sub)
        .arg("--")
        .arg(reports_itself())
        .output()
        .unwrap();
    let r: crate::harness::Ran = r.into();
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    let canon = std::fs::canonicalize(&sub).unwrap();
    assert_eq!(v["cwd"], canon.to_str().unwrap());
    let f = facts(&std::fs::read(env.attempt_dir("cwd", 1).join("stdout.log")).unwrap());
    assert_eq!(Path::new(&f["cwd"]), canon);
    // A relative program path is looked up from --cwd.
    std::fs::copy(fixture("exits_silently.sh"), sub.join("local.sh")).unwrap();
    let r = env
        .cmd()
        .args(["run", "--json", "--cwd"])
        .arg(&sub)
        .args(["--", "./local.sh"])
        .output()
        .unwrap();
    let r: crate::harness::Ran = r.into();
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json()["argv"][0],
        canon.join("./local.sh").to_str().unwrap()
    );
    // Without --cwd, the current directory.
    let r = env.sp(["run", "--json", "--", "true"]);
    assert_eq!(
        r.json()["cwd"],
        std::fs::canonicalize(&env.work).unwrap().to_str().unwrap()
    );
}

#[test]
fn run_id_flag_names_the_run_and_generated_ids_are_valid() {
    let env = TestEnv::new();
    let r = env.sp(["run", "--json", "--run-id", "my.run_1-x", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(v["run_id"], "my.run_1-x");
    assert!(
        env.attempt_dir("my.run_1-x", 1)
            .join("result.json")
            .is_file()
    );
    let r = env.sp(["run", "--json", "--", "true"]);
    let id = r.json()["run_id"].as_str().unwrap().to_owned();
    assert!(
        env.attempt_dir(&id, 1).join("result.json").is_file(),
        "{id}"
    );
    let runs: Vec<_> = std::fs::read_dir(env.home.join("runs")).unwrap().collect();
    assert_eq!(runs.len(), 2);
}

#[test]
fn labels_and_correlation_id_are_recorded() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--json",
        "--run-id",
        "lab",
        "--label",
        "team=core",
        "--label",
        "ticket=T-1=x",
        "--correlation-id",
        "corr-123",
        "--",
        "true",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    let want = serde_json::json!({"team": "core", "ticket": "T-1=x"});
    assert_eq!(v["labels"], want);
    assert_eq!(v["correlation_id"], "corr-123");
    let run = env.read_json(&env.run_dir("lab").join("run.json"));
    assert_eq!(run["labels"], want);
    assert_eq!(run["correlation_id"], "corr-123");
    let spec = env.read_json(&env.attempt_dir("lab", 1).join("spec.json"));
    assert_eq!(spec["labels"], want);
    // Without them: empty labels and a null correlation id.
    let v = env.sp(["run", "--json", "--", "true"]).json();
    assert_eq!(v["labels"], serde_json::json!({}));
    assert_eq!(v["correlation_id"], Value::Null);
}

#[test]
fn env_values_reach_the_program_but_no_record() {
    let env = TestEnv::new();
    let secret = "s3cr3t-VALUE-4f9a1c";
    let r = env.sp([
        "run",
        "--json",
        "--run-id",
        "sec",
        "--env",
        &format!("SECRET_X={secret}"),
        "--",
        reports_itself().to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    let dir = env.attempt_dir("sec", 1);
    let f = facts(&std::fs::read(dir.join("stdout.log")).unwrap());
    assert_eq!(
        f["secret_reversed"],
        secret.chars().rev().collect::<String>(),
        "the value reaches the program"
    );
    assert_eq!(f["secret"], "***", "the value is masked in stdout.log");
    assert!(
        !r.stdout.contains(secret),
        "the value is printed in the envelope"
    );
    // Every record the attempt left, hidden ones too (not the program's own output): the
    // environment file's inode became worker.json, whose first version stays as
    // .worker-running.json.
    let output = ["stdout.log", "stderr.log", "events.jsonl", "output.txt"];
    let mut records = vec![env.run_dir("sec").join("run.json")];
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() && !output.iter().any(|o| e.file_name() == *o) {
            records.push(e.path());
        }
    }
    for name in [
        "spec.json",
        "result.json",
        "worker.json",
        ".worker-running.json",
        "launch.json",
    ] {
        assert!(records.contains(&dir.join(name)), "{name} is missing");
    }
    for p in &records {
        let text = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let text = String::from_utf8_lossy(&text);
        assert!(
            !text.contains(secret),
            "{} holds the value of SECRET_X",
            p.display()
        );
    }
    let spec = std::fs::read_to_string(dir.join("spec.json")).unwrap();
    assert!(
        spec.contains("SECRET_X"),
        "spec.json names the variable: {spec}"
    );
    assert!(
        !dir.join(".env").exists(),
        "the environment file is gone once read (renamed to worker.json)"
    );
}

#[test]
fn exit_code_of_run_follows_the_outcome() {
    let env = TestEnv::new();
    let ok = env.sp([
        "run",
        "--json",
        "--",
        fixture("mixed_output.sh").to_str().unwrap(),
        "0",
    ]);
    assert_eq!(ok.code, 0, "{ok:?}");
    assert_eq!(ok.json()["status"], "completed");
    let bad = env.sp([
        "run",
        "--json",
        "--",
        fixture("mixed_output.sh").to_str().unwrap(),
        "3",
    ]);
    assert_eq!(bad.code, 1, "{bad:?}");
    let v = bad.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_kind"], "exit");
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["signal"], Value::Null);
    env.assert_no_leftovers();
}

#[test]
fn json_prints_exactly_one_document_and_human_output_is_not_json() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--json",
        "--",
        fixture("mixed_output.sh").to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let docs: Vec<Value> = serde_json::Deserializer::from_str(&r.stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(docs.len(), 1, "{}", r.stdout);
    assert_valid_envelope(&docs[0]);
    assert!(
        !r.stdout.contains("hello from stdout"),
        "the program's output is not on our stdout"
    );
    let h = env.sp(["run", "--run-id", "human", "--", "true"]);
    assert_eq!(h.code, 0, "{h:?}");
    assert!(
        serde_json::from_str::<Value>(&h.stdout).is_err(),
        "{}",
        h.stdout
    );
    assert!(
        h.stdout.contains("human") && h.stdout.contains("completed"),
        "{}",
        h.stdout
    );
}

#[test]
fn detach_prints_the_run_id_and_returns_while_the_program_runs() {
    let env = TestEnv::new();
    let flag = env.root.path().join("flag");
    let r = env
        .cmd()
        .args(["run", "--detach", "--run-id", "bg", "--"])
        .arg(fixture("waits_for_flag.sh"))
        .arg(&flag)
        .output()
        .unwrap();
    let r: crate::harness::Ran = r.into();
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "bg\n");
    // It returned while the program still waits for its flag.
    assert!(!env.attempt_dir("bg", 1).join("result.json").exists());
    let st = env.sp(["status", "--json", "bg"]);
    assert_eq!(st.code, 3, "{st:?}");
    assert_eq!(st.json()["status"], "running");
    // --json: an object with the run id.
    let flag2 = env.root.path().join("flag2");
    let r = env
        .cmd()
        .args(["run", "--detach", "--json", "--run-id", "bg2", "--"])
        .arg(fixture("waits_for_flag.sh"))
        .arg(&flag2)
        .output()
        .unwrap();
    let r: crate::harness::Ran = r.into();
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(v["run_id"], "bg2");
    assert_eq!(v["status"], "starting");
    assert!(!env.attempt_dir("bg2", 1).join("result.json").exists());
    std::fs::write(&flag, "").unwrap();
    std::fs::write(&flag2, "").unwrap();
    let w = env.sp(["wait", "--json", "bg", "bg2"]);
    assert_eq!(w.code, 0, "{w:?}");
    for e in w.json().as_array().unwrap() {
        assert_valid_envelope(e);
        assert_eq!(e["status"], "completed");
    }
    env.assert_no_leftovers();
}

#[test]
fn result_appears_without_any_waiting_supervisor() {
    let env = TestEnv::new();
    let r = env.sp([
        "run",
        "--detach",
        "--run-id",
        "alone",
        "--",
        fixture("mixed_output.sh").to_str().unwrap(),
        "3",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let p = env.attempt_dir("alone", 1).join("result.json");
    let v = wait_until("result.json of a detached run", || {
        std::fs::read(&p)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    });
    assert_valid_envelope(&v);
    assert_eq!(v["failure_kind"], "exit");
    assert_eq!(v["exit_code"], 3);
    env.assert_no_leftovers();
}

#[test]
fn a_missing_shebang_interpreter_is_a_spawn_failure() {
    let env = TestEnv::new();
    let script = env.work.join("bad_interp.sh");
    std::fs::write(&script, "#!/nonexistent/interpreter\necho never\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = env.sp(["run", "--json", "--run-id", "sp", "--", "./bad_interp.sh"]);
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["failure_kind"], "spawn");
    assert_eq!(v["exit_code"], Value::Null);
    let errors = v["output"]["errors"].as_array().unwrap();
    assert!(!errors.is_empty(), "{v}");
    assert!(
        errors[0].as_str().unwrap().contains("bad_interp.sh"),
        "{errors:?}"
    );
    env.assert_no_leftovers();
}

/// Run `a` (`--max-depth 1`) whose program runs `b`, whose program tries to run `c`; each inner
/// `subpane run` is prefixed with `prefix` (a command that changes its environment, or
/// nothing). Checks that `b` ran as `a`'s child and `c` was refused, naming the chain.
fn nest_three(env: &TestEnv, prefix: &str) {
    let q = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let bin = crate::harness::BIN;
    let inner = format!("{prefix}{bin} run --run-id c -- true; echo c_rc=$?");
    let outer = format!(
        "{prefix}{bin} run --run-id b -- bash -c {}; echo b_rc=$?",
        q(&inner)
    );
    let r = env.sp([
        "run",
        "--json",
        "--run-id",
        "a",
        "--max-depth",
        "1",
        "--",
        "bash",
        "-c",
        &outer,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let a_out = std::fs::read_to_string(env.attempt_dir("a", 1).join("stdout.log")).unwrap();
    assert!(a_out.contains("b_rc=0"), "{a_out}");
    let b_out = std::fs::read_to_string(env.attempt_dir("b", 1).join("stdout.log")).unwrap();
    assert!(b_out.contains("c_rc=2"), "{b_out}");
    let b_err = std::fs::read_to_string(env.attempt_dir("b", 1).join("stderr.log")).unwrap();
    assert!(
        b_err.contains("at most 1 deep") && b_err.contains("a > b > c"),
        "{b_err}"
    );
    assert!(!env.run_dir("c").exists());
    let b = env.result("b");
    assert_eq!(b["parent_run"], "a");
    assert_eq!(b["depth"], 1);
    assert!(env.result("a").get("parent_run").is_none());
}

#[test]
fn runs_started_inside_an_attempt_record_their_parent_and_stop_at_the_depth_limit() {
    let env = TestEnv::new();
    nest_three(&env, "");
    // ls shows the tree: b under a.
    let ls = env.sp(["ls", "--json"]);
    let rows = ls.json();
    let row = |id: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["run_id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(row("b")["parent_run"], "a");
    assert_eq!(row("b")["depth"], 1);
    assert_eq!(row("a")["depth"], 0);
    let human = env.sp(["ls"]).stdout;
    let lines: Vec<&str> = human.lines().collect();
    let ai = lines.iter().position(|l| l.starts_with("a ")).unwrap();
    assert!(lines[ai + 1].starts_with("  b "), "{human}");
    env.assert_no_leftovers();
}

/// A program that clears the lineage variables (as an MCP client that starts its servers with
/// a few variables only does) still starts its runs as nested ones, within the limit: the
/// lineage comes from the nearest ancestor inside an attempt.
#[test]
fn clearing_the_lineage_variables_does_not_escape_the_depth_limit() {
    let env = TestEnv::new();
    nest_three(
        &env,
        "env -u SUBPANE_RUN_ID -u SUBPANE_ATTEMPT -u SUBPANE_DEPTH -u SUBPANE_MAX_DEPTH \
         -u SUBPANE_CHAIN ",
    );
    env.assert_no_leftovers();
}

/// A program that is itself `env -i subpane run …` (exec'd, so the worker is its parent and
/// no process between has the lineage variables) still starts a nested run within the limit:
/// the worker is found as the ancestor and its attempt's spec gives the lineage.
#[test]
fn a_nested_run_whose_parent_is_the_worker_itself_keeps_the_depth_limit() {
    let env = TestEnv::new();
    let bin = crate::harness::BIN;
    let bare = format!(
        "exec env -i PATH=\"$PATH\" SUBPANE_HOME=\"$SUBPANE_HOME\" \
         SUBPANE_TMUX_SOCKET=\"$SUBPANE_TMUX_SOCKET\" {bin}"
    );
    let inner = format!("{bare} run --run-id c -- true");
    let outer = format!("{bare} run --run-id b -- bash -c '{inner}'");
    let r = env
        .cmd()
        .env("SUBPANE_HOME", &env.home)
        .args(["run", "--json", "--run-id", "a", "--max-depth", "1", "--"])
        .args(["bash", "-c", &outer])
        .output()
        .unwrap();
    let r: crate::harness::Ran = r.into();
    // b ran as a's child; c, one deeper than the limit, was refused, so b failed with 2.
    assert_eq!(r.code, 1, "{r:?}");
    let b = env.result("b");
    assert_eq!(b["parent_run"], "a", "{b}");
    assert_eq!(b["depth"], 1, "{b}");
    assert_eq!(b["exit_code"], 2, "{b}");
    let b_err = std::fs::read_to_string(env.attempt_dir("b", 1).join("stderr.log")).unwrap();
    assert!(
        b_err.contains("at most 1 deep") && b_err.contains("a > b > c"),
        "{b_err}"
    );
    assert!(!env.run_dir("c").exists());
    env.assert_no_leftovers();
}

/// With the private server up, the panes of `run` and of a batched `fanout` are made by the
/// server itself, asked on its socket: a `tmux` binary first on `PATH` that fails every
/// command is never needed.
#[test]
fn with_the_server_up_no_tmux_client_is_needed_to_start_attempts() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let r = env.sp(["run", "--run-id", "first", "--", "true"]);
    assert_eq!(r.code, 0, "{r:?}");
    // Keeps the server up between the runs below.
    let r = env.sp(["run", "--detach", "--run-id", "keep", "--", "sleep", "30"]);
    assert_eq!(r.code, 0, "{r:?}");
    let bin = env.root.path().join("failing-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("tmux");
    std::fs::write(&fake, "#!/bin/sh\necho \"fake tmux ran: $*\" >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin.clone()];
    paths.extend(std::env::split_paths(&path));
    let path = std::env::join_paths(paths).unwrap();
    let r: crate::harness::Ran = env
        .cmd()
        .env("PATH", &path)
        .args(["run", "--json", "--run-id", "direct", "--", "echo", "made"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["status"], "completed", "{v}");
    assert!(
        v["tmux"]["pane_id"]
            .as_str()
            .is_some_and(|p| p.starts_with('%')),
        "{v}"
    );
    let tasks = env.root.path().join("tasks.jsonl");
    std::fs::write(&tasks, "{\"argv\": [\"true\"]}\n{\"argv\": [\"true\"]}\n").unwrap();
    let r: crate::harness::Ran = env
        .cmd()
        .env("PATH", &path)
        .args(["fanout", tasks.to_str().unwrap(), "--json"])
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stderr.contains("fake tmux ran"), "{r:?}");
    let r = env.sp(["cancel", "keep"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = env.sp(["wait", "keep"]);
    assert_eq!(r.code, 130, "{r:?}");
}
