//! The rules of the plan, each over a fake machine ([`super::fake::Fake`]).

use super::fake::*;
use super::*;

mod agents;
mod sandbox;

#[test]
fn a_command_is_resolved_and_recorded_without_values() {
    let sys = Fake::new();
    let mut req = cmd(&["make", "test"]);
    req.env.insert("SECRET".into(), "hunter2".into());
    req.labels.insert("team".into(), "core".into());
    let p = plan(&req, &home(), &sys).unwrap();
    assert_eq!(p.spec.argv, ["/usr/bin/make", "test"]);
    assert_eq!(p.spec.run_id.as_str(), "generated-1");
    assert_eq!(p.spec.cwd, Path::new("/work"));
    assert_eq!(p.spec.attempt, 1);
    assert_eq!(p.spec.tmux.session, "generated-1-1");
    assert_eq!(p.spec.created_at, "2027-01-15T08:00:00.000Z");
    assert_eq!(p.record.labels["team"], "core");
    // tmux's variables are gone, --env is set, and no record holds a value.
    assert!(!p.env.iter().any(|(k, _)| k == "TMUX"));
    assert!(p.env.contains(&("SECRET".into(), "hunter2".into())));
    assert_eq!(p.spec.env.set, ["SECRET"]);
    let records = serde_json::to_string(&(&p.spec, &p.record)).unwrap();
    assert!(!records.contains("hunter2"), "{records}");
    assert!(!format!("{p:?}").contains("hunter2"));
}

#[test]
fn bad_run_ids_are_refused() {
    let sys = Fake::new();
    for bad in ["", "..", "a/b", "-x", &"x".repeat(129)] {
        let mut req = cmd(&["make"]);
        req.run_id = Some(bad.to_owned());
        let m = refused(&req, &sys);
        assert!(m.contains("run id"), "{bad}: {m}");
    }
}

#[test]
fn durations_need_a_unit_and_timeouts_a_length() {
    let sys = Fake::new();
    for (field, value, says) in [
        ("timeout", "10", "`10` needs a unit; give 10s, 10m or 10h"),
        ("timeout", "0s", "greater than zero"),
        (
            "idle_timeout",
            "soon",
            "`soon` is not a duration; give a number with a unit",
        ),
        ("grace", "", "is empty"),
    ] {
        let mut req = cmd(&["make"]);
        let v = Some(value.to_owned());
        match field {
            "timeout" => req.timeout = v,
            "idle_timeout" => req.idle_timeout = v,
            _ => req.grace = v,
        }
        let m = refused(&req, &sys);
        assert!(m.contains(says), "{field}={value}: {m}");
    }
    let mut req = cmd(&["make"]);
    req.grace = Some("0s".into());
    req.timeout = Some("1m30s".into());
    let p = plan(&req, &home(), &sys).unwrap();
    assert_eq!(p.spec.limits.grace_ms, 0);
    assert_eq!(p.spec.limits.timeout_ms, Some(90_000));
    assert_eq!(p.spec.limits.linger_ms, 5000);
}

#[test]
fn at_file_tasks_are_read_and_missing_ones_refused() {
    let mut sys = Fake::new();
    sys.on_path.insert("pi".into(), "/usr/bin/pi".into());
    sys.files
        .insert("/work/task.md".into(), "fix the test".into());
    let mut req = RunRequest {
        agent: Some(AgentKind::Pi),
        task: Some("@task.md".into()),
        ..RunRequest::default()
    };
    // A task is text to the planner: `@FILE` is the command line's (and a fan-out file's).
    let literal = plan(&req, &home(), &sys).unwrap();
    assert_eq!(literal.prompt.as_deref(), Some("@task.md"));
    req.read_at_files();
    let p = plan(&req, &home(), &sys).unwrap();
    assert_eq!(p.prompt.as_deref(), Some("fix the test"));
    assert_eq!(p.spec.argv[0], "/usr/bin/pi");
    // pi takes input (RPC): the task is its first message, not an argument.
    assert_eq!(p.spec.task.as_ref().unwrap().prompt, "fix the test");
    assert_eq!(p.spec.stdin, crate::spec::Stdin::Input);
    let req = RunRequest {
        task_file: Some("nope.md".into()),
        ..req
    };
    let m = refused(&req, &sys);
    assert!(m.contains("--task @FILE `nope.md` cannot be read"), "{m}");
    let both = RunRequest {
        task: Some("hi".into()),
        ..req.clone()
    };
    assert!(refused(&both, &sys).contains("not both"));
    let req = RunRequest {
        task: Some("  \n".into()),
        task_file: None,
        ..req
    };
    assert!(refused(&req, &sys).contains("--task is empty"));
}

#[test]
fn a_missing_agent_cli_says_how_to_install_it() {
    let sys = Fake::new();
    let req = RunRequest {
        agent: Some(AgentKind::Claude),
        task: Some("hi".into()),
        ..RunRequest::default()
    };
    let m = refused(&req, &sys);
    assert!(m.contains("`claude` was not found on PATH"), "{m}");
    assert!(m.contains("npm"), "{m}");
}

#[test]
fn programs_are_found_like_a_shell_would() {
    let mut sys = Fake::new();
    assert!(refused(&cmd(&["nope"]), &sys).contains("`nope` was not found on PATH"));
    assert!(refused(&cmd(&["./gone.sh"]), &sys).contains("does not exist"));
    sys.programs.insert("/work/./data.txt".into(), false);
    assert!(refused(&cmd(&["./data.txt"]), &sys).contains("not an executable file"));
    sys.programs.insert("/work/./ok.sh".into(), true);
    let p = plan(&cmd(&["./ok.sh"]), &home(), &sys).unwrap();
    assert_eq!(p.spec.argv[0], "/work/./ok.sh");
    // --env PATH=… is the PATH the program is looked up on.
    let mut req = cmd(&["make"]);
    req.env.insert("PATH".into(), "".into());
    sys.on_path.remove("make");
    assert!(refused(&req, &sys).contains("not found"));
}

#[test]
fn what_to_run_must_be_one_thing() {
    let mut sys = Fake::new();
    sys.on_path.insert("pi".into(), "/usr/bin/pi".into());
    let both = RunRequest {
        agent: Some(AgentKind::Pi),
        task: Some("hi".into()),
        argv: vec!["make".into()],
        ..RunRequest::default()
    };
    assert!(refused(&both, &sys).contains("not both"));
    assert!(refused(&RunRequest::default(), &sys).contains("nothing to run"));
    let mut task_for_command = cmd(&["make"]);
    task_for_command.task = Some("hi".into());
    assert!(refused(&task_for_command, &sys).contains("--task needs --agent"));
    let mut model_for_command = cmd(&["make"]);
    model_for_command.model = Some("m".into());
    assert!(refused(&model_for_command, &sys).contains("--model is for agents"));
    let no_task = RunRequest {
        agent: Some(AgentKind::Pi),
        ..RunRequest::default()
    };
    assert!(refused(&no_task, &sys).contains("needs --task"));
}

#[test]
fn cwd_must_be_an_existing_directory() {
    let mut sys = Fake::new();
    let mut req = cmd(&["make"]);
    req.cwd = Some("/missing".into());
    assert!(refused(&req, &sys).contains("--cwd `/missing` cannot be used"));
    sys.files.insert("/work/f".into(), String::new());
    req.cwd = Some("f".into());
    assert!(refused(&req, &sys).contains("is not a directory"));
    req.cwd = Some("/src".into());
    assert_eq!(
        plan(&req, &home(), &sys).unwrap().spec.cwd,
        Path::new("/src")
    );
}

#[test]
fn env_names_must_be_variable_names() {
    let sys = Fake::new();
    for bad in ["1X", "A-B", "A B", ""] {
        let mut req = cmd(&["make"]);
        req.env.insert(bad.into(), "v".into());
        assert!(
            refused(&req, &sys).contains("not a valid variable name"),
            "{bad}"
        );
    }
}

/// The environment file ends each variable with NUL: a NUL inside a value (a request over
/// JSON can carry one) would smuggle in another variable.
#[test]
fn a_nul_byte_in_a_variable_is_refused() {
    let mut sys = Fake::new();
    let mut req = cmd(&["make"]);
    req.env.insert("A".into(), "x\0LD_PRELOAD=/x.so".into());
    assert!(refused(&req, &sys).contains("`A` holds a NUL byte"));
    sys.vars.push(("LANG".into(), "C\0LD_PRELOAD=/x.so".into()));
    assert!(refused(&cmd(&["make"]), &sys).contains("`LANG` holds a NUL byte"));
}

#[test]
fn tmux_must_be_installed() {
    let mut sys = Fake::new();
    sys.on_path.remove("tmux");
    assert!(refused(&cmd(&["make"]), &sys).contains("tmux was not found"));
}

#[test]
fn arguments_the_kernel_would_refuse_are_refused_first() {
    let mut sys = Fake::new();
    let big = "x".repeat(MAX_ARG_BYTES + 1);
    assert!(refused(&cmd(&["make", &big]), &sys).contains("at most 128 KiB in one argument"));
    sys.on_path
        .insert("claude".into(), "/usr/bin/claude".into());
    let req = RunRequest {
        agent: Some(AgentKind::Claude),
        task: Some("hi".into()),
        system_prompt: Some(big.clone()),
        ..RunRequest::default()
    };
    assert!(refused(&req, &sys).contains("--system-prompt is 128 KiB"));
    // Many arguments, each small, past ARG_MAX.
    sys.arg_max = 64 * 1024;
    let many: Vec<String> = (0..100).map(|_| "y".repeat(1000)).collect();
    let mut argv = vec!["make"];
    argv.extend(many.iter().map(String::as_str));
    assert!(refused(&cmd(&argv), &sys).contains("the system allows 64 KiB"));
    // A long task is no problem: it goes to the agent by file.
    sys.arg_max = 2 * 1024 * 1024;
    let req = RunRequest {
        agent: Some(AgentKind::Claude),
        task: Some("z".repeat(3 * 1024 * 1024)),
        ..RunRequest::default()
    };
    assert!(plan(&req, &home(), &sys).is_ok());
}

/// What the worker masks: every `--env` name, the caller's variables named like a secret and
/// the agent's configured key, never an `--env-plain` name or one subpane sets; a short
/// value is warned of by name.
#[test]
fn secret_names_are_recorded_and_plain_ones_are_not() {
    let mut sys = Fake::new();
    sys.vars
        .push(("GITHUB_TOKEN".into(), "ghp_inherited_value".into()));
    sys.vars.push(("EDITOR".into(), "vim-editor".into()));
    let mut req = cmd(&["make"]);
    req.env
        .insert("API_BASE".into(), "http://secret-host".into());
    req.env.insert("PIN".into(), "1234".into());
    req.env_plain.insert("MODE".into(), "visible".into());
    let p = plan(&req, &home(), &sys).unwrap();
    assert_eq!(p.spec.env.secret, ["API_BASE", "GITHUB_TOKEN", "PIN"]);
    assert_eq!(p.spec.env.plain, ["MODE"]);
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(
        p.warnings[0].contains("PIN") && !p.warnings[0].contains("1234"),
        "{:?}",
        p.warnings
    );
    // A name given both ways is refused.
    req.env_plain.insert("PIN".into(), "1234".into());
    assert!(refused(&req, &sys).contains("`PIN` is given with --env too"));
    // An inherited variable made plain is not secret.
    let mut req = cmd(&["make"]);
    req.env_plain
        .insert("GITHUB_TOKEN".into(), "public-token".into());
    let p = plan(&req, &home(), &sys).unwrap();
    assert!(p.spec.env.secret.is_empty(), "{:?}", p.spec.env.secret);
}

/// The key a pi `models.json` or a Codex `config.toml` names, even under a name that does
/// not look secret.
#[test]
fn the_key_an_agents_config_names_is_secret() {
    use crate::adapter::adapter_for;
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("models.json"),
        r#"{"providers": {"a": {"apiKey": "LLM_ACCESS"}, "b": {"apiKey": "sk-literal"}}}"#,
    )
    .unwrap();
    std::fs::write(
        d.path().join("config.toml"),
        "model = \"m\"\n[model_providers.p]\nenv_key = \"GATEWAY_ACCESS\"\n",
    )
    .unwrap();
    // What the config gives as a key, a name or a literal value …
    assert_eq!(
        adapter_for(AgentKind::Pi).key_vars(d.path()),
        ["LLM_ACCESS", "sk-literal"]
    );
    assert_eq!(
        adapter_for(AgentKind::Codex).key_vars(d.path()),
        ["GATEWAY_ACCESS"]
    );
    assert!(adapter_for(AgentKind::Claude).key_vars(d.path()).is_empty());
    // … of which the planner keeps the names the program's environment has.
    let env: Vec<(OsString, OsString)> = vec![
        ("PI_CODING_AGENT_DIR".into(), d.path().into()),
        ("LLM_ACCESS".into(), "llm-access-value".into()),
        ("EDITOR".into(), "vim".into()),
    ];
    let req = RunRequest::default();
    assert_eq!(
        super::env::secret_names(&req, AgentKind::Pi, &env),
        ["LLM_ACCESS"]
    );
}

/// A run from a sandbox names the agent's state directory in its own variables: what is
/// there (a FIFO, a link, a huge file) is the program's, and reading the agent's config for
/// its key must neither hang nor follow it.
#[test]
fn the_agents_config_is_read_bounded_and_not_through_a_link() {
    use crate::adapter::adapter_for;
    let d = tempfile::tempdir().unwrap();
    nix::unistd::mkfifo(&d.path().join("models.json"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let outside = d.path().join("outside.toml");
    std::fs::write(&outside, "env_key = \"LEAKED_NAME\"\n").unwrap();
    std::os::unix::fs::symlink(&outside, d.path().join("config.toml")).unwrap();
    let dir = d.path().to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let pi = adapter_for(AgentKind::Pi).key_vars(&dir);
        let codex = adapter_for(AgentKind::Codex).key_vars(&dir);
        let _ = tx.send((pi, codex));
    });
    let (pi, codex) = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("reading a FIFO for the agent's key hung the planner");
    assert!(pi.is_empty(), "{pi:?}");
    assert!(codex.is_empty(), "a link was followed: {codex:?}");
}
