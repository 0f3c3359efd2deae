//! The planner's sandbox rules: settings, network, variables, policy paths, lineage.

use super::*;

fn sandboxed(argv: &[&str]) -> RunRequest {
    RunRequest {
        sandbox: true,
        ..cmd(argv)
    }
}

#[test]
fn sandbox_settings_need_the_sandbox() {
    let sys = Fake::new();
    for (req, flag) in [
        (
            RunRequest {
                network: Some("full".into()),
                ..cmd(&["make"])
            },
            "--network",
        ),
        (
            RunRequest {
                writable: vec!["/src".into()],
                ..cmd(&["make"])
            },
            "--writable",
        ),
        (
            RunRequest {
                hide: vec!["/src".into()],
                ..cmd(&["make"])
            },
            "--hide",
        ),
        (
            RunRequest {
                env_pass: vec!["X".into()],
                ..cmd(&["make"])
            },
            "--env-pass",
        ),
    ] {
        let m = refused(&req, &sys);
        assert!(m.contains(flag) && m.contains("add --sandbox"), "{m}");
    }
    for (req, flag) in [
        (
            RunRequest {
                max_procs: Some(12),
                ..cmd(&["make"])
            },
            "--max-procs",
        ),
        (
            RunRequest {
                max_memory: Some("1G".into()),
                ..cmd(&["make"])
            },
            "--max-memory",
        ),
        (
            RunRequest {
                max_tmp: Some("2G".into()),
                max_file_size: Some("9G".into()),
                ..cmd(&["make"])
            },
            "--max-file-size",
        ),
    ] {
        let m = refused(&req, &sys);
        assert!(m.starts_with(flag) && m.contains("add --sandbox"), "{m}");
    }
}

/// A client that fills in every default of the schema (Ajv's `useDefaults`) is not refused
/// for it: the sandbox settings at their defaults are taken with a warning each, and the
/// rest are the values in force.
#[test]
fn every_default_the_table_shows_is_taken() {
    use crate::app::field::FIELDS;
    let sys = Fake::new();
    let mut line = serde_json::json!({"argv": ["make"]});
    for f in FIELDS {
        if let Some(d) = f.default {
            line[f.name] = d.json();
        }
    }
    let req: RunRequest = serde_json::from_value(line.clone()).unwrap();
    let p = plan(&req, &home(), &sys).unwrap_or_else(|e| panic!("{line}: {e}"));
    assert_eq!(p.spec.limits, Limits::default());
    for f in FIELDS.iter().filter(|f| f.sandbox && f.default.is_some()) {
        let named = format!("{{{}}} is a sandbox setting and is ignored", f.name);
        assert!(
            p.warnings.iter().any(|w| w.starts_with(&named)),
            "{}: {:?}",
            f.name,
            p.warnings
        );
    }
    line["sandbox"] = true.into();
    let req: RunRequest = serde_json::from_value(line.clone()).unwrap();
    let p = plan(&req, &home(), &sys).unwrap_or_else(|e| panic!("{line}: {e}"));
    assert_eq!(p.spec.sandbox.limits, crate::spec::SandboxLimits::DEFAULT);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

/// The bounds the table shows are the planner's: the bound itself is taken, one past it is
/// refused naming the field.
#[test]
fn the_bounds_the_table_shows_are_the_planners() {
    use crate::app::field::FIELDS;
    let mut sys = Fake::new();
    sys.on_path.insert("pi".into(), "/usr/bin/pi".into());
    let mut checked = 0;
    for f in FIELDS {
        let with = |n: u64| {
            let mut line = serde_json::json!({"argv": ["make"], "sandbox": f.sandbox});
            // A budget is an agent's.
            if f.name.starts_with("max_t") {
                line = serde_json::json!({"agent": "pi", "task": "t"});
            }
            line[f.name] = n.into();
            serde_json::from_value::<RunRequest>(line).unwrap()
        };
        for (bound, past) in [
            (f.min, f.min.and_then(|m| m.checked_sub(1))),
            (f.max, f.max.map(|m| m + 1)),
        ] {
            let Some(bound) = bound else { continue };
            assert!(
                plan(&with(bound), &home(), &sys).is_ok(),
                "{} {bound}",
                f.name
            );
            checked += 1;
            // One past a bound may not fit the type (u32): then the type refuses it.
            let Some(past) = past.filter(|p| u32::try_from(*p).is_ok()) else {
                continue;
            };
            let m = refused(&with(past), &sys);
            assert!(
                m.contains(&format!("--{}", f.name.replace('_', "-"))),
                "{} {past}: {m}",
                f.name
            );
        }
    }
    assert!(checked >= 3, "{checked}");
}

#[test]
fn network_patterns_are_checked_before_anything_starts() {
    let sys = Fake::new();
    for (policy, says) in [
        ("allow:*", "every host"),
        ("allow:*.com", "public suffix"),
        ("allow:https://x.example.com", "is a URL"),
        ("allow:x.example.com:443", "has a port"),
        ("allow:", "is empty"),
        ("everything", "not a policy"),
    ] {
        let req = RunRequest {
            network: Some(policy.into()),
            ..sandboxed(&["make"])
        };
        let m = refused(&req, &sys);
        assert!(m.contains(says), "{policy}: {m}");
    }
}

#[test]
fn a_sandboxed_program_gets_only_the_variables_it_needs() {
    let mut sys = Fake::new();
    sys.vars.push(("SECRET".into(), "s3".into()));
    sys.vars.push(("GITHUB_TOKEN".into(), "gh".into()));
    sys.vars.push(("LC_ALL".into(), "C.UTF-8".into()));
    let mut req = sandboxed(&["make"]);
    req.env_pass = vec!["GITHUB_TOKEN".into()];
    req.env.insert("MODE".into(), "ci".into());
    let p = plan(&req, &home(), &sys).unwrap();
    let names: Vec<&str> = p.env.iter().filter_map(|(k, _)| k.to_str()).collect();
    for want in ["PATH", "HOME", "LC_ALL", "GITHUB_TOKEN", "MODE", "TMPDIR"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for gone in ["SECRET", "TMUX", "HTTP_PROXY"] {
        assert!(!names.contains(&gone), "{gone} passed: {names:?}");
    }
    assert!(!p.spec.env.inherit);
    assert_eq!(
        p.spec.env.passed,
        ["GITHUB_TOKEN", "HOME", "LC_ALL", "PATH"]
    );
    assert_eq!(p.spec.env.set, ["TMPDIR", "MODE"]);
    // With an allow list the proxy is announced the usual ways.
    req.network = Some("allow:api.example.com,127.0.0.1".into());
    let p = plan(&req, &home(), &sys).unwrap();
    let url = format!("http://127.0.0.1:{}", crate::sandbox::PROXY_PORT);
    for k in ["HTTP_PROXY", "https_proxy", "ALL_PROXY"] {
        assert!(p.env.contains(&(k.into(), url.clone().into())), "{k}");
    }
    assert!(p.env.contains(&("NODE_USE_ENV_PROXY".into(), "1".into())));
    let records = serde_json::to_string(&p.spec).unwrap();
    assert!(!records.contains("\"gh\""), "{records}");
    assert!(!records.contains("s3"), "{records}");
    // An agent keeps its own keys and configuration.
    sys.on_path
        .insert("claude".into(), "/usr/bin/claude".into());
    sys.vars.push(("ANTHROPIC_API_KEY".into(), "k".into()));
    sys.vars.push(("OPENAI_API_KEY".into(), "o".into()));
    let req = RunRequest {
        agent: Some(AgentKind::Claude),
        task: Some("hi".into()),
        sandbox: true,
        ..RunRequest::default()
    };
    let p = plan(&req, &home(), &sys).unwrap();
    let names: Vec<&str> = p.env.iter().filter_map(|(k, _)| k.to_str()).collect();
    assert!(names.contains(&"ANTHROPIC_API_KEY") && !names.contains(&"OPENAI_API_KEY"));
    // Claude gets a state directory of its own, seeded from the user's (default under
    // HOME), which stays out of its reach.
    let own = PathBuf::from("/h/runs/generated-1/attempts/1/agent");
    let sb = &p.spec.sandbox;
    assert!(sb.writable.contains(&own), "{:?}", sb.writable);
    assert!(!sb.writable.contains(&PathBuf::from("/root/.claude")));
    let state = sb.agent_state.as_ref().unwrap();
    assert_eq!(state.seeded_from, PathBuf::from("/root/.claude"));
    assert_eq!(state.home_file, Some(PathBuf::from("/root/.claude.json")));
    assert!(
        p.env
            .contains(&("CLAUDE_CONFIG_DIR".into(), own.clone().into()))
    );
    assert!(p.spec.env.set.contains(&"CLAUDE_CONFIG_DIR".to_owned()));
    let bad = RunRequest {
        env_pass: vec!["A-B".into()],
        ..sandboxed(&["make"])
    };
    assert!(refused(&bad, &sys).contains("--env-pass name `A-B`"));
}

#[test]
fn the_policy_names_every_path_resolved() {
    let mut sys = Fake::new();
    sys.dirs.push("/work/.git".into());
    sys.files.insert("/work/.git/config".into(), String::new());
    sys.dirs.push("/data".into());
    sys.dirs.push("/run".into());
    sys.files.insert("/run/resolv.conf".into(), String::new());
    sys.links
        .insert("/etc/resolv.conf".into(), "/run/resolv.conf".into());
    sys.vars
        .push(("SSH_AUTH_SOCK".into(), "/tmp/ssh-x/agent.1".into()));
    sys.files.insert("/work/secret.txt".into(), String::new());
    let req = RunRequest {
        writable: vec!["/data".into()],
        hide: vec!["secret.txt".into()],
        ..sandboxed(&["make"])
    };
    let p = plan(&req, &home(), &sys).unwrap();
    let sb = &p.spec.sandbox;
    assert!(sb.enabled);
    assert_eq!(sb.network, Network::None);
    assert_eq!(
        sb.writable,
        [
            PathBuf::from("/work"),
            PathBuf::from("/h/runs/generated-1/attempts/1/out"),
            PathBuf::from("/data")
        ]
    );
    // --hide, the tmux socket, the subpane home (only `out/` is carried back in), and the
    // escape sockets that exist (not the SSH agent's nor the caller's tmux server's, which
    // this machine lacks).
    assert_eq!(
        sb.hidden,
        [
            PathBuf::from("/work/secret.txt"),
            PathBuf::from("/tmp/tmux-0/subpane"),
            PathBuf::from("/h"),
            PathBuf::from("/run")
        ]
    );
    // What the user named is recorded apart, for a retry to keep.
    let asked = sb.asked.as_ref().unwrap();
    assert_eq!(asked.writable, [PathBuf::from("/data")]);
    assert_eq!(asked.hidden, [PathBuf::from("/work/secret.txt")]);
    // The name service's file under the hidden /run stays readable; the nest socket too.
    assert_eq!(
        sb.read_only,
        [PathBuf::from("/run/resolv.conf"), nest_socket()]
    );
    // The workspace's repository is the program's privately; no HEAD file here: no branch.
    let git = sb.git.as_ref().unwrap();
    assert_eq!(git.common_dir, PathBuf::from("/work/.git"));
    assert_eq!(git.branch, None);
    // Paths that do not exist are refused, not ignored.
    let req = RunRequest {
        hide: vec!["/nope".into()],
        ..sandboxed(&["make"])
    };
    assert!(refused(&req, &sys).contains("--hide `/nope` cannot be used"));
    // Without --sandbox the policy is off and the environment inherited.
    let p = plan(&cmd(&["make"]), &home(), &sys).unwrap();
    assert_eq!(p.spec.sandbox, SandboxSpec::default());
    assert!(p.spec.env.inherit && p.spec.env.passed.is_empty());
}

#[test]
fn a_run_started_inside_an_attempt_records_its_lineage_and_respects_the_depth_limit() {
    let mut sys = Fake::new();
    // Top level: no lineage, the default limit.
    let p = plan(&cmd(&["make"]), &home(), &sys).unwrap();
    assert_eq!(p.spec.lineage, None);
    assert_eq!(p.spec.max_depth, 3);
    // Inside attempt 2 of `b`, itself started by `a`.
    sys.vars.push(("SUBPANE_RUN_ID".into(), "b".into()));
    sys.vars.push(("SUBPANE_ATTEMPT".into(), "2".into()));
    sys.vars.push(("SUBPANE_DEPTH".into(), "1".into()));
    sys.vars.push(("SUBPANE_MAX_DEPTH".into(), "2".into()));
    sys.vars.push(("SUBPANE_CHAIN".into(), "a/b".into()));
    let mut req = cmd(&["make"]);
    req.run_id = Some("c".into());
    let p = plan(&req, &home(), &sys).unwrap();
    let l = p.spec.lineage.clone().unwrap();
    assert_eq!(
        (l.parent_run.as_str(), l.parent_attempt, l.depth),
        ("b", 2, 2)
    );
    assert_eq!(l.chain, ["a", "b"]);
    assert_eq!(p.record.lineage, Some(l));
    // A child cannot raise the limit it inherited, only lower it.
    req.max_depth = Some(10);
    assert_eq!(plan(&req, &home(), &sys).unwrap().spec.max_depth, 2);
    req.max_depth = Some(1);
    let m = refused(&req, &sys);
    assert!(
        m.contains("at most 1 deep") && m.contains("a > b > c"),
        "{m}"
    );
    // One more level below the inherited limit is refused too.
    sys.vars.retain(|(k, _)| k != "SUBPANE_DEPTH");
    sys.vars.push(("SUBPANE_DEPTH".into(), "2".into()));
    req.max_depth = None;
    assert!(refused(&req, &sys).contains("would be 3 deep"));
}

#[test]
fn a_caller_that_lost_the_lineage_variables_gets_them_from_its_attempt_ancestor() {
    let mut sys = Fake::new();
    sys.ancestor_vars = vec![
        ("SUBPANE_RUN_ID".into(), "outer".into()),
        ("SUBPANE_DEPTH".into(), "1".into()),
        ("SUBPANE_MAX_DEPTH".into(), "2".into()),
        ("SUBPANE_CHAIN".into(), "top/outer".into()),
    ];
    let mut req = cmd(&["make"]);
    req.run_id = Some("inner".into());
    let p = plan(&req, &home(), &sys).unwrap();
    let l = p.spec.lineage.clone().unwrap();
    assert_eq!((l.parent_run.as_str(), l.depth), ("outer", 2));
    assert_eq!(l.chain, ["top", "outer"]);
    assert_eq!(p.spec.max_depth, 2);
    // The limit holds through it: one more level is refused.
    sys.ancestor_vars[1].1 = "2".into();
    assert!(refused(&req, &sys).contains("would be 3 deep"));
    // The caller's own variables, when it has them, win.
    sys.vars.push(("SUBPANE_RUN_ID".into(), "mine".into()));
    let l = plan(&req, &home(), &sys).unwrap().spec.lineage.unwrap();
    assert_eq!((l.parent_run.as_str(), l.depth), ("mine", 1));
}

#[test]
fn a_program_installed_under_tmp_is_carried_into_the_sandbox_read_only() {
    let mut sys = Fake::new();
    let cli = PathBuf::from("/tmp/ck/tools/node_modules/@x/cli/node_modules/dep/bin.js");
    sys.files.insert(cli.clone(), String::new());
    sys.on_path.insert("cli".into(), cli);
    let p = plan(&sandboxed(&["cli"]), &home(), &sys).unwrap();
    // The outermost node_modules' directory: the CLI's dependencies sit beside it.
    assert_eq!(
        p.spec.sandbox.read_only,
        [PathBuf::from("/tmp/ck/tools"), nest_socket()]
    );
    // A plain program: its directory. Outside /tmp, or inside a writable tree: nothing.
    let tool = PathBuf::from("/tmp/ck/bin/tool");
    sys.files.insert(tool.clone(), String::new());
    sys.on_path.insert("tool".into(), tool);
    let p = plan(&sandboxed(&["tool"]), &home(), &sys).unwrap();
    assert_eq!(
        p.spec.sandbox.read_only,
        [PathBuf::from("/tmp/ck/bin"), nest_socket()]
    );
    let p = plan(&sandboxed(&["make"]), &home(), &sys).unwrap();
    assert_eq!(p.spec.sandbox.read_only, [nest_socket()]);
    let mine = PathBuf::from("/tmp/ws/build.sh");
    sys.dirs.push("/tmp/ws".into());
    sys.files.insert(mine.clone(), String::new());
    sys.programs.insert("/tmp/ws/./build.sh".into(), true);
    let req = RunRequest {
        cwd: Some("/tmp/ws".into()),
        ..sandboxed(&["./build.sh"])
    };
    let p = plan(&req, &home(), &sys).unwrap();
    assert_eq!(
        p.spec.sandbox.read_only,
        [nest_socket()],
        "{:?}",
        p.spec.sandbox
    );
}

/// Every sandboxed attempt's request socket for nested runs (read-only: connecting is all).
fn nest_socket() -> PathBuf {
    PathBuf::from("/h/runs/generated-1/attempts/1/nest.sock")
}
