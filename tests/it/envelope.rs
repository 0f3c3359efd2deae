//! The envelope against its JSON Schema: real envelopes of every kind of ending validate,
//! and the schema names exactly the fields the code writes (additionalProperties is false and
//! every field is required), so the two cannot drift apart.

use serde_json::Value;

use crate::harness::{TestEnv, assert_valid_envelope};

fn schema() -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/result.v1.json");
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

#[test]
fn envelopes_of_every_ending_match_the_schema() {
    let env = TestEnv::new();
    let mut seen = Vec::new();
    let cases: Vec<(Vec<&str>, &str, Option<&str>)> = vec![
        (vec!["--", "echo", "hi"], "completed", None),
        (vec!["--", "sh", "-c", "exit 3"], "failed", Some("exit")),
        (
            vec!["--timeout", "200ms", "--grace", "0s", "--", "sleep", "30"],
            "failed",
            Some("timeout"),
        ),
        (
            vec!["--idle-timeout", "200ms", "--", "sleep", "30"],
            "failed",
            Some("idle_timeout"),
        ),
    ];
    for (args, status, kind) in cases {
        let mut full = vec!["run", "--json"];
        full.extend(args);
        let v = env.sp(&full).json();
        assert_eq!(v["status"], status, "{v}");
        assert_eq!(v["failure_kind"].as_str(), kind, "{v}");
        // Stopped by its own timeout: `cancelled_by` says so; an ending of its own has none.
        let by = matches!(kind, Some("timeout" | "idle_timeout")).then_some("timeout");
        assert_eq!(v["cancelled_by"].as_str(), by, "{v}");
        assert_valid_envelope(&v);
        seen.push(v);
    }
    // A spawn failure: the interpreter of the script does not exist.
    let script = env.work.join("bad-interpreter.sh");
    std::fs::write(&script, "#!/nonexistent/interpreter\necho never\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let v = env
        .sp(["run", "--json", "--", "./bad-interpreter.sh"])
        .json();
    assert_eq!(v["failure_kind"], "spawn", "{v}");
    assert!(
        v["output"]["errors"][0]
            .as_str()
            .unwrap()
            .contains("cannot start"),
        "{v}"
    );
    assert_valid_envelope(&v);
    // Cancelled.
    let id = env
        .sp(["run", "--detach", "--", "sleep", "30"])
        .stdout
        .trim()
        .to_owned();
    let v = env.sp(["cancel", "--json", "--grace", "0s", &id]).json();
    assert_eq!(v["status"], "cancelled", "{v}");
    assert_eq!(v["cancelled_by"], "cancel", "{v}");
    assert_valid_envelope(&v);
    // The CLI's summary line names who asked.
    let s = env.sp(["status", &id]);
    assert!(s.stdout.contains("cancelled by cancel"), "{s:?}");
    // Cancelled by a signal to its worker from outside subpane.
    let id = env
        .sp(["run", "--detach", "--", "sleep", "30"])
        .stdout
        .trim()
        .to_owned();
    let pid = env.worker_pid(&id);
    // SAFETY: plain kill(2) of the test's own worker.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let v = env.sp(["wait", "--json", &id]).json();
    assert_eq!(v["status"], "cancelled", "{v}");
    assert_eq!(v["cancelled_by"], "signal", "{v}");
    assert_valid_envelope(&v);
    // Lost: the worker is killed.
    let id = env
        .sp(["run", "--detach", "--", "sleep", "30"])
        .stdout
        .trim()
        .to_owned();
    let pid = env.worker_pid(&id);
    // SAFETY: plain kill(2) of the test's own worker.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let r = env.sp(["wait", "--json", &id]);
    let v = r.json();
    assert_eq!(v["failure_kind"], "lost", "{v}");
    assert_eq!(r.code, 1);
    assert_valid_envelope(&v);
    env.assert_no_leftovers();
}

#[test]
fn schema_requires_every_field_the_code_writes() {
    let env = TestEnv::new();
    let v = env.sp(["run", "--json", "--", "echo", "hi"]).json();
    let s = schema();
    let keys_of = |obj: &Value| -> Vec<String> {
        let mut k: Vec<String> = obj.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let required = |node: &Value| -> Vec<String> {
        let mut r: Vec<String> = node["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_owned())
            .collect();
        r.sort();
        r
    };
    assert_eq!(keys_of(&v), required(&s));
    // Every property is required but the optional ones added since v1 (absent when they do
    // not apply), and each of those says so in its description.
    let optional = [
        "budget",
        "cancelled_by",
        "depth",
        "git",
        "group",
        "host",
        "input",
        "parent_run",
        "resumed_from",
        "secrets",
        "stopped_ms",
        "stops",
        "tails",
        "worktree",
    ];
    let mut all = required(&s);
    all.extend(optional.iter().map(|k| (*k).to_owned()));
    all.sort();
    assert_eq!(keys_of(&s["properties"]), all);
    for k in optional {
        assert!(v.get(k).is_none(), "{k} is written for a plain run: {v}");
        let d = s["properties"][k]["description"].as_str().unwrap_or("");
        assert!(d.starts_with("Optional"), "{k}: {d}");
    }
    for nested in ["output", "filter", "cleanup", "tmux"] {
        assert_eq!(
            keys_of(&v[nested]),
            required(&s["properties"][nested]),
            "{nested}"
        );
        assert_eq!(
            s["properties"][nested]["additionalProperties"], false,
            "{nested}"
        );
    }
    assert_eq!(s["additionalProperties"], false);
    assert_eq!(s["properties"]["schema"]["const"], v["schema"]);
    // An artifact has the schema's required fields, and `hashed_bytes` only when the file was
    // not hashed whole (a written one is validated in escapes::tree).
    let art = &s["properties"]["artifacts"]["items"];
    for a in v["artifacts"].as_array().unwrap() {
        assert_eq!(keys_of(a), required(art), "{a}");
    }
    let mut all = required(art);
    all.push("hashed_bytes".to_owned());
    all.sort();
    assert_eq!(keys_of(&art["properties"]), all);
    assert_eq!(art["additionalProperties"], false);
    let d = art["properties"]["hashed_bytes"]["description"]
        .as_str()
        .unwrap_or("");
    assert!(d.starts_with("Optional"), "hashed_bytes: {d}");
    // The sandbox's record of what it enforced, and its limits, name exactly the schema's.
    let v = env.sp(["run", "--json", "--sandbox", "--", "true"]).json();
    let sb = &s["properties"]["sandbox"]["properties"];
    let enforced = &v["sandbox"]["enforced"];
    assert_eq!(keys_of(enforced), required(&sb["enforced"]));
    assert_eq!(sb["enforced"]["additionalProperties"], false);
    let limits = &sb["enforced"]["properties"]["limits"];
    assert_eq!(keys_of(&enforced["limits"]), required(limits));
    let policy_limits = &sb["policy"]["properties"]["limits"];
    assert_eq!(
        keys_of(&v["sandbox"]["policy"]["limits"]),
        required(policy_limits)
    );
}

#[test]
fn the_schema_rejects_what_the_contract_forbids() {
    // A check that cannot fail is worse than none: prove the validator bites.
    let env = TestEnv::new();
    let good = env.sp(["run", "--json", "--", "true"]).json();
    assert_valid_envelope(&good);
    let s = schema();
    let validator = jsonschema::validator_for(&s).unwrap();
    let mut bad = good.clone();
    bad["status"] = "finished".into();
    assert!(!validator.is_valid(&bad));
    let mut bad = good.clone();
    bad.as_object_mut().unwrap().remove("artifacts");
    assert!(!validator.is_valid(&bad));
    let mut bad = good.clone();
    bad["artifacts"][0]["sha256"] = "xyz".into();
    assert!(!validator.is_valid(&bad));
    let mut bad = good.clone();
    bad["artifacts"][0]["hashed_bytes"] = (-1).into();
    assert!(!validator.is_valid(&bad));
    let mut bad = good;
    bad["surprise"] = 1.into();
    assert!(!validator.is_valid(&bad));
}
