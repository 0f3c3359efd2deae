//! `subpane mcp` spoken to by the MCP SDK's own client (rmcp), over the real binary's stdio.
//!
//! Every tool, bad arguments, progress, a client's cancel, two calls at once on one
//! connection, two servers on one home, and the bounds (output, no environment values).

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::harness::{TestEnv, assert_valid_envelope, pid_alive, wait_until};

/// A client that keeps every progress notification.
#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

impl Client {
    /// The progress messages in the server's order. The client handles each notification on
    /// a task of its own, so they may arrive in any order (even after the call's answer);
    /// the progress value, which increases with each one, tells the order.
    fn messages(&self) -> Vec<String> {
        let mut p = self.progress.lock().unwrap().clone();
        p.sort_by(|a, b| a.progress.total_cmp(&b.progress));
        p.into_iter().filter_map(|p| p.message).collect()
    }

    /// Waits until a progress message contains `needle`.
    async fn said(&self, needle: &'static str) {
        let me = self.clone();
        until(needle, move || {
            me.messages().iter().any(|m| m.contains(needle))
        })
        .await;
    }
}

/// A connected client, the server's pid, what it wrote on stderr so far, and the tools'
/// output schemas (every answer is checked against its tool's).
pub(crate) struct Conn {
    svc: RunningService<RoleClient, Client>,
    client: Client,
    pid: i32,
    stderr: Arc<Mutex<String>>,
    outputs: std::collections::HashMap<String, Value>,
}

/// The most bytes of one answer as a JSON-RPC message.
const MAX_MESSAGE: usize = 64 * 1024;

pub(crate) async fn connect(env: &TestEnv) -> Conn {
    connect_with(env, |_| {}).await
}

/// [`connect`], with `adjust` applied to the server's command first.
async fn connect_with(env: &TestEnv, adjust: impl FnOnce(&mut std::process::Command)) -> Conn {
    let mut cmd = env.cmd();
    cmd.arg("mcp");
    adjust(&mut cmd);
    let (transport, err) = TokioChildProcess::builder(tokio::process::Command::from(cmd))
        .stderr(Stdio::piped())
        .spawn()
        .expect("start subpane mcp");
    let pid = transport.id().expect("the server's pid") as i32;
    let stderr = Arc::new(Mutex::new(String::new()));
    let sink = stderr.clone();
    let mut err = err.expect("piped stderr");
    tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let s = String::from_utf8_lossy(&buf[..n]).into_owned();
            eprint!("{s}");
            sink.lock().unwrap().push_str(&s);
        }
    });
    let client = Client::default();
    let svc = client
        .clone()
        .serve(transport)
        .await
        .expect("initialize with subpane mcp");
    let outputs = svc
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .filter_map(|t| {
            let s = Value::Object((*t.output_schema?).clone());
            Some((t.name.to_string(), s))
        })
        .collect();
    Conn {
        svc,
        client,
        pid,
        stderr,
        outputs,
    }
}

impl Conn {
    pub(crate) async fn call(&self, name: &str, args: Value) -> CallToolResult {
        let params = CallToolRequestParams::new(name.to_owned())
            .with_arguments(args.as_object().expect("an object").clone());
        let r = self
            .svc
            .call_tool(params)
            .await
            .unwrap_or_else(|e| panic!("`{name}` call: {e}"));
        self.check(name, &r);
        r
    }

    /// Every answer is one bounded message whose structured content fits its tool's output
    /// schema.
    fn check(&self, name: &str, r: &CallToolResult) {
        let n = serde_json::to_string(r).unwrap().len();
        assert!(n < MAX_MESSAGE, "`{name}` answered {n} bytes");
        let (Some(doc), Some(schema)) = (&r.structured_content, self.outputs.get(name)) else {
            return;
        };
        let v = jsonschema::validator_for(schema).expect("the output schema compiles");
        let errors: Vec<String> = v
            .iter_errors(doc)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "`{name}` answer does not fit its output schema: {errors:?}\n{doc}"
        );
    }

    /// Closes the connection and checks the server exits.
    pub(crate) async fn close(self) {
        let pid = self.pid;
        let _ = self.svc.cancel().await;
        tokio::task::spawn_blocking(move || {
            wait_until("the MCP server to exit once its client closed", || {
                (!pid_alive(pid)).then_some(())
            })
        })
        .await
        .unwrap();
    }
}

pub(crate) fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn doc(r: &CallToolResult) -> Value {
    r.structured_content.clone().expect("structured content")
}

pub(crate) fn is_error(r: &CallToolResult) -> bool {
    r.is_error == Some(true)
}

/// Waits (off the runtime's threads) until `f` holds.
pub(crate) async fn until(what: &'static str, f: impl FnMut() -> bool + Send + 'static) {
    let mut f = f;
    tokio::task::spawn_blocking(move || wait_until(what, || f().then_some(())))
        .await
        .unwrap();
}

fn result_status(env: &TestEnv, run: &str) -> Option<String> {
    let p = env.attempt_dir(run, 1).join("result.json");
    let v: Value = serde_json::from_slice(&std::fs::read(p).ok()?).ok()?;
    v["status"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_every_tool_with_a_schema_and_a_description() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let tools = c.svc.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "run", "status", "wait", "logs", "cancel", "send", "list", "fanout", "retry", "pause",
            "resume"
        ]
    );
    for t in &tools {
        assert_eq!(t.input_schema["type"], "object", "{}", t.name);
        assert!(
            t.description.as_deref().is_some_and(|d| d.len() > 40),
            "{}",
            t.name
        );
    }
    let run = &tools[0].input_schema["properties"];
    for f in [
        "argv",
        "agent",
        "task",
        "cwd",
        "model",
        "timeout",
        "idle_timeout",
        "labels",
        "sandbox",
        "wait",
    ] {
        assert!(run.get(f).is_some(), "run has no `{f}`: {run}");
    }
    // Nothing was started by connecting and listing.
    assert!(!env.home.join("runs").exists());
    assert!(!env.server_alive());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_waits_and_returns_the_envelope_with_progress() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let r = c
        .call(
            "run",
            json!({"argv": ["sh", "-c", "echo sub-$((6*7))"], "run_id": "c1",
                   "labels": {"team": "core"}}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let t = text(&r);
    assert!(t.starts_with("run c1 (attempt 1) completed: exit 0"), "{t}");
    assert!(t.contains("sub-42"), "{t}");
    // The structured content leads with the one-line summary, and holds what a model reads
    // of the envelope: the end of the output as `tails`, none of its bulky parts, in 4 KiB.
    let v = doc(&r);
    let o = v.as_object().unwrap();
    assert_eq!(o.keys().next().map(String::as_str), Some("summary"), "{v}");
    assert_eq!(
        v["summary"].as_str(),
        t.lines().next(),
        "the text leads with the summary"
    );
    assert!(
        o.get("next").is_none(),
        "a finished run has nothing next: {v}"
    );
    for bulky in ["artifacts", "filter", "tmux"] {
        assert!(o.get(bulky).is_none(), "`{bulky}` in a brief answer: {v}");
    }
    assert_eq!(v["sandbox"], json!({"enabled": false}), "{v}");
    assert_eq!(v["tails"], json!({"stdout": "sub-42\n", "stderr": null}));
    assert_eq!(v["labels"], json!({"team": "core"}));
    let whole = env.result("c1");
    for k in [
        "run_id",
        "attempt",
        "status",
        "exit_code",
        "duration_ms",
        "output",
    ] {
        assert_eq!(v[k], whole[k], "{k}");
    }
    let result_path = env.attempt_dir("c1", 1).join("result.json");
    assert_eq!(v["result_path"].as_str(), result_path.to_str());
    let n = serde_json::to_string(&v).unwrap().len();
    assert!(
        n <= 4096,
        "a finished run's structured content is {n} bytes: {v}"
    );
    // With `detail`, the whole envelope: result.json, with the summary and the tails.
    let r = c
        .call("status", json!({"run_id": "c1", "detail": true}))
        .await;
    let mut v = doc(&r);
    let o = v.as_object_mut().unwrap();
    assert!(o.remove("summary").is_some());
    assert_eq!(
        o.remove("tails"),
        Some(json!({"stdout": "sub-42\n", "stderr": null}))
    );
    assert_valid_envelope(&v);
    assert_eq!(v, env.result("c1"));
    let msgs = c.client.messages();
    assert!(
        msgs.first()
            .is_some_and(|m| m.starts_with("run c1 (attempt 1) started")),
        "{msgs:?}"
    );
    assert!(
        msgs.iter().any(|m| m.contains("1/1 finished; run c1")),
        "{msgs:?}"
    );
    // The client takes each notification on a task of its own, so they may arrive in any
    // order: the server's order is told by the values, which must all differ.
    let mut p = c.client.progress.lock().unwrap().clone();
    p.sort_by(|a, b| a.progress.total_cmp(&b.progress));
    assert!(
        p.windows(2).all(|w| w[1].progress > w[0].progress),
        "progress values must differ, one per message: {p:?}"
    );
    c.close().await;
    env.assert_no_leftovers();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detached_runs_are_seen_by_status_wait_logs_list_and_cancel() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let r = c
        .call(
            "run",
            json!({"argv": ["sh", "-c", "echo line-$((1+1)); echo oops >&2"], "run_id": "quick",
                   "wait": false, "labels": {"kind": "quick"}}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(doc(&r)["run_id"], "quick");
    assert!(text(&r).contains("`wait`"), "{}", text(&r));
    let r = c
        .call(
            "run",
            json!({"argv": ["sleep", "30"], "run_id": "slow", "wait": false, "grace": "1s"}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));

    // wait: the quick one ends; the slow one is still running when the timeout passes.
    let r = c
        .call(
            "wait",
            json!({"run_ids": ["quick", "slow"], "timeout": "1s"}),
        )
        .await;
    let v = doc(&r);
    assert_eq!(v["timed_out"], true, "{v}");
    assert_eq!(v["runs"][0]["status"], "completed", "{v}");
    assert_eq!(v["runs"][1]["status"], "running", "{v}");
    assert_eq!(v["first_finished"], "quick");
    // mode any: the first to finish is enough, the other is reported still running.
    let r = c
        .call("wait", json!({"run_ids": ["slow", "quick"], "mode": "any"}))
        .await;
    let v = doc(&r);
    assert_eq!(v["timed_out"], false, "{v}");
    assert_eq!(v["first_finished"], "quick", "{v}");
    // In the order they ended: the finished one first, the one still running last.
    assert_eq!(v["runs"][0]["status"], "completed", "{v}");
    assert_eq!(v["runs"][1]["status"], "running", "{v}");
    assert_eq!(v["counts"], json!({"completed": 1, "running": 1}), "{v}");
    assert!(
        text(&r).starts_with("2 runs: 1 completed, 1 running\n"),
        "{}",
        text(&r)
    );
    assert!(
        text(&r).contains("run slow (attempt 1) is running"),
        "{}",
        text(&r)
    );

    // status of each.
    let r = c.call("status", json!({"run_id": "slow"})).await;
    assert_eq!(doc(&r)["schema"], "subpane.status/v1");
    assert_eq!(doc(&r)["status"], "running");
    let r = c.call("status", json!({"run_id": "quick"})).await;
    assert_eq!(doc(&r)["schema"], "subpane.result/v1");

    // logs: stdout by default for a command, stderr on request, bounded by max_bytes.
    let r = c.call("logs", json!({"run_id": "quick"})).await;
    // The text once, in the content: not again in the structured content.
    assert!(doc(&r).get("text").is_none(), "{}", doc(&r));
    assert!(text(&r).ends_with("line-2\n"), "{}", text(&r));
    let r = c
        .call(
            "logs",
            json!({"run_id": "quick", "file": "stderr", "max_bytes": 3}),
        )
        .await;
    assert!(text(&r).ends_with(")\nps\n"), "{}", text(&r));
    assert_eq!(doc(&r)["truncated"], true);
    assert_eq!(doc(&r)["size"], 5);
    // A command has no final text: a tool error that names the file that has its words.
    let r = c
        .call("logs", json!({"run_id": "quick", "file": "output"}))
        .await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("`file: stdout`"), "{}", text(&r));

    // list, with filters.
    let r = c.call("list", json!({})).await;
    assert_eq!(doc(&r)["total"], 2, "{}", doc(&r));
    let r = c.call("list", json!({"labels": {"kind": "quick"}})).await;
    assert_eq!(doc(&r)["runs"][0]["run_id"], "quick");
    assert_eq!(doc(&r)["total"], 1);
    let r = c.call("list", json!({"status": "running"})).await;
    assert_eq!(doc(&r)["runs"][0]["run_id"], "slow");
    assert!(
        text(&r).contains("slow (attempt 1) running"),
        "{}",
        text(&r)
    );

    // cancel: the slow one ends cancelled; cancelling the quick one changes nothing.
    let r = c.call("cancel", json!({"run_id": "slow"})).await;
    assert_eq!(doc(&r)["cancel_requested"], true, "{}", doc(&r));
    let r = c.call("wait", json!({"run_ids": ["slow"]})).await;
    assert_eq!(doc(&r)["runs"][0]["status"], "cancelled", "{}", doc(&r));
    let r = c.call("cancel", json!({"run_id": "quick"})).await;
    assert!(text(&r).starts_with("already finished"), "{}", text(&r));
    assert_eq!(doc(&r)["status"], "completed");
    c.close().await;
    env.assert_no_leftovers();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_tool_errors_and_the_server_goes_on() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let cases: &[(&str, Value, &str)] = &[
        (
            "run",
            json!({"argv": ["true"], "timeuot": "1s"}),
            "unknown field `timeuot`; did you mean `timeout`? (the tool's input schema",
        ),
        (
            "fanout",
            json!({"tasks": [{"argv": ["true"]}, {"argv": ["true"], "sandbx": true}]}),
            "`tasks[1].sandbx`: unknown field `sandbx`; did you mean `sandbox`?",
        ),
        ("run", json!({}), "argv"),
        ("run", json!({"argv": ["true"], "timeout": "5"}), "timeout"),
        (
            "run",
            json!({"argv": ["true"], "wait": "yes"}),
            "`wait`: invalid type",
        ),
        (
            "run",
            json!({"argv": ["true"], "labels": {"k": 1}}),
            "`labels.k`: invalid type",
        ),
        (
            "run",
            json!({"argv": ["true"], "timeout": "5"}),
            "`timeout` `5` needs a unit; give 5s, 5m or 5h (or 500ms)",
        ),
        // The request's own rules, each naming its field as the tools spell it.
        (
            "run",
            json!({"argv": ["true"], "max_procs": 12}),
            "`max_procs` is a sandbox setting; add `sandbox`",
        ),
        (
            "run",
            json!({"argv": ["true"], "max_memory": "1G"}),
            "`max_memory` is a sandbox setting",
        ),
        (
            "run",
            json!({"argv": ["true"], "max_tmp": "1M"}),
            "`max_tmp` is a sandbox setting",
        ),
        (
            "run",
            json!({"argv": ["true"], "max_file_size": "1M"}),
            "`max_file_size` is a sandbox setting",
        ),
        (
            "run",
            json!({"argv": ["true"], "sandbox": true, "max_procs": 10}),
            "`max_procs` 10 is out of range; give 300 to",
        ),
        (
            "run",
            json!({"argv": ["true"], "sandbox": true, "max_memory": "lots"}),
            "`max_memory` `lots` is not a size",
        ),
        (
            "run",
            json!({"argv": ["true"], "sandbox": true, "hide": ["/"]}),
            "`hide` `/` would hide everything",
        ),
        (
            "run",
            json!({"argv": ["true"], "sandbox": true, "network": "some"}),
            "`network` `some` is not a policy",
        ),
        (
            "run",
            json!({"agent": "pi", "task_file": "/nonexistent/task.md"}),
            "`task_file` `/nonexistent/task.md` cannot be read",
        ),
        (
            "run",
            json!({"agent": "pi", "task": "x", "system_prompt": "a", "system_prompt_file": "/x"}),
            "`system_prompt` is given twice; give it as text or as a file (`system_prompt_file`)",
        ),
        (
            "run",
            json!({"argv": ["true"], "model": "m"}),
            "`model` is for agents: it needs `agent`",
        ),
        (
            "run",
            json!({"argv": ["true"], "task": "t"}),
            "`task` needs `agent`; `argv` takes its own arguments",
        ),
        (
            "run",
            json!({"argv": ["true"], "cwd": "/nonexistent-dir"}),
            "`cwd` `/nonexistent-dir` cannot be used",
        ),
        (
            "run",
            json!({"argv": ["true"], "env": {"A B": "1"}}),
            "`env` name `A B` is not a valid variable name",
        ),
        (
            "run",
            json!({"argv": ["true"], "sandbox": true, "env_pass": ["A-B"]}),
            "`env_pass` name `A-B` is not a valid variable name",
        ),
        ("run", json!({"agent": "pi"}), "`agent` pi needs `task`"),
        (
            "run",
            json!({"argv": ["true"], "max_wait": "0s"}),
            "`max_wait`",
        ),
        ("run", json!({"argv": ["true"], "run_id": "../x"}), "run id"),
        (
            "run",
            json!({"agent": "gpt", "task": "x"}),
            "unknown variant `gpt`",
        ),
        ("status", json!({"run_id": "nope"}), "no run `nope`"),
        ("status", json!({}), "missing field `run_id`"),
        ("wait", json!({}), "give `run_ids`"),
        ("wait", json!({"run_ids": ["nope"]}), "no run `nope`"),
        (
            "logs",
            json!({"run_id": "nope", "file": "secrets"}),
            "unknown variant `secrets`",
        ),
        ("cancel", json!({"run_id": "nope"}), "no run `nope`"),
        (
            "list",
            json!({"status": "sleeping"}),
            "unknown variant `sleeping`",
        ),
        ("fanout", json!({"tasks": []}), "`tasks` is empty"),
        (
            "fanout",
            json!({"tasks": [{"argv": ["true"]}, {"argv": ["true"], "timeout": "x"}]}),
            "task 2: field timeout `x` is not a duration",
        ),
        (
            "fanout",
            json!({"tasks": [{"argv": ["true"]}, {"argv": "true"}]}),
            "`tasks[1].argv`: invalid type",
        ),
        ("retry", json!({"run_id": "nope"}), "no run `nope`"),
        ("retry", json!({}), "missing field `run_id`"),
        ("retry", json!({"run_id": ""}), "`run_id` is required"),
    ];
    for (tool, args, want) in cases {
        let r = c.call(tool, args.clone()).await;
        let t = text(&r);
        assert!(is_error(&r), "{tool} {args}: not an error: {t}");
        assert!(t.contains(want), "{tool} {args}: {t}");
        // In the words of the tools' arguments, never the command line's: no `--` before
        // a name (a flag), nor a command line to type.
        let flag = t
            .match_indices("--")
            .any(|(i, _)| t[i + 2..].starts_with(|c: char| c.is_ascii_alphabetic()));
        assert!(!flag && !t.contains("`subpane "), "{tool} {args}: {t}");
    }
    // Nothing started, and the server still answers.
    assert!(
        !env.home.join("runs").exists()
            || std::fs::read_dir(env.home.join("runs"))
                .unwrap()
                .next()
                .is_none()
    );
    let err = c
        .svc
        .call_tool(CallToolRequestParams::new("explode"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("no tool `explode`"), "{err}");
    let r = c.call("list", json!({})).await;
    assert_eq!(doc(&r)["total"], 0);
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_call_cancels_its_run() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let params = CallToolRequestParams::new("run").with_arguments(
        json!({"argv": ["sleep", "60"], "run_id": "long", "grace": "1s"})
            .as_object()
            .unwrap()
            .clone(),
    );
    let handle = c
        .svc
        .peer()
        .send_request_with_option(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            PeerRequestOptions::default(),
        )
        .await
        .unwrap();
    let client = c.client.clone();
    until("the run's `started` progress", move || {
        client
            .messages()
            .iter()
            .any(|m| m.contains("run long (attempt 1) started"))
    })
    .await;
    let t0 = Instant::now();
    handle
        .cancel(Some("the test gave up".into()))
        .await
        .unwrap();
    let env_home = env.attempt_dir("long", 1).join("result.json");
    until("the cancelled run's result.json", move || env_home.exists()).await;
    assert_eq!(result_status(&env, "long").as_deref(), Some("cancelled"));
    // The envelope says who cancelled it.
    let errors = env.result("long")["output"]["errors"].to_string();
    assert!(errors.contains("cancelled by the MCP client"), "{errors}");
    assert_eq!(env.result("long")["cancelled_by"], "mcp_client");
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "it ran on: {:?}",
        t0.elapsed()
    );
    // The connection is still good.
    let r = c.call("status", json!({"run_id": "long"})).await;
    assert_eq!(doc(&r)["failure_kind"], "cancelled");
    c.close().await;
    env.assert_no_leftovers();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_call_does_not_hold_up_others_and_a_second_server_shares_the_home() {
    let env = TestEnv::new();
    let c = Arc::new(connect(&env).await);
    let flag = env.root.path().join("go");
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; echo released",
        flag.display()
    );
    let c1 = c.clone();
    let long = tokio::spawn(async move {
        c1.call(
            "run",
            json!({"argv": ["sh", "-c", script], "run_id": "held"}),
        )
        .await
    });
    // While `run` waits, other calls on the same connection are answered.
    let status_path = env.run_dir("held").join("run.json");
    until("the held run to start", move || status_path.exists()).await;
    let r = c.call("status", json!({"run_id": "held"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(!long.is_finished());
    // A second server (another parent) on the same home sees the run and starts its own.
    let other = connect(&env).await;
    let r = other.call("list", json!({})).await;
    assert_eq!(doc(&r)["runs"][0]["run_id"], "held", "{}", doc(&r));
    assert!(
        ["starting", "running"].contains(&doc(&r)["runs"][0]["status"].as_str().unwrap()),
        "{}",
        doc(&r)
    );
    let r = other
        .call("run", json!({"argv": ["true"], "run_id": "other"}))
        .await;
    assert_eq!(doc(&r)["status"], "completed");
    std::fs::write(&flag, "").unwrap();
    let r = long.await.unwrap();
    assert!(text(&r).contains("released"), "{}", text(&r));
    assert_eq!(doc(&r)["status"], "completed");
    let r = c.call("list", json!({})).await;
    assert_eq!(doc(&r)["total"], 2);
    other.close().await;
    Arc::into_inner(c).expect("the only handle").close().await;
    env.assert_no_leftovers();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_runs_every_task_within_the_limit() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let mut tasks = Vec::new();
    for i in 0..6 {
        let code = if i == 3 { 1 } else { 0 };
        tasks.push(
            json!({"argv": ["sh", "-c", format!("exit {code}")], "run_id": format!("t{i}"),
                          "labels": {"n": i.to_string()}}),
        );
    }
    let r = c
        .call("fanout", json!({"tasks": tasks, "concurrency": 2}))
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let v = doc(&r);
    assert_eq!(v["status"], "ended", "{v}");
    assert!(v.get("next").is_none(), "{v}");
    assert_eq!(v["counts"]["total"], 6, "{v}");
    assert_eq!(v["counts"]["completed"], 5, "{v}");
    assert_eq!(v["counts"]["failed"], 1, "{v}");
    assert_eq!(v["counts"]["concurrency"], 2);
    assert_eq!(v["counts"]["exit_code"], 1);
    assert_eq!(v["tasks"][3]["run_id"], "t3");
    assert_eq!(v["tasks"][3]["status"], "failed");
    let group = v["group"].as_str().unwrap().to_owned();
    let t = text(&r);
    assert!(
        t.starts_with(&format!("group {group}: 6 tasks, 5 completed, 1 failed")),
        "{t}"
    );
    // A failure line carries its exit code.
    assert!(t.contains("task 4: t3 failed (exit 1)"), "{t}");
    c.client.said("6/6 done").await;
    // In the server's order, the count of ended tasks never goes down.
    let done: Vec<usize> = c
        .client
        .messages()
        .iter()
        .filter_map(|m| m.split('/').next()?.parse().ok())
        .collect();
    assert!(
        done.windows(2).all(|w| w[1] >= w[0]),
        "{:?}",
        c.client.messages()
    );
    let r = c.call("list", json!({"group": group})).await;
    assert_eq!(doc(&r)["total"], 6);
    let r = c.call("wait", json!({"group": group})).await;
    assert_eq!(doc(&r)["runs"].as_array().unwrap().len(), 6);
    c.close().await;
    env.assert_no_leftovers();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_bounded_and_hold_no_environment_values() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let secret = "sk-value-never-returned-1234";
    let r = c
        .call(
            "run",
            json!({"argv": ["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo END"],
                   "run_id": "big", "env": {"MY_TOKEN": secret}}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let t = text(&r);
    assert!(
        t.len() < 8 * 1024,
        "the text is not bounded: {} bytes",
        t.len()
    );
    assert!(t.contains("END"), "the end of the output is shown");
    let mut all = serde_json::to_string(&doc(&r)).unwrap() + &t;
    for (tool, args) in [
        ("status", json!({"run_id": "big"})),
        ("list", json!({})),
        ("wait", json!({"run_ids": ["big"]})),
        ("logs", json!({"run_id": "big", "max_bytes": 100_000_000})),
    ] {
        let r = c.call(tool, args).await;
        assert!(!is_error(&r), "{tool}: {}", text(&r));
        all.push_str(&text(&r));
        all.push_str(&serde_json::to_string(&doc(&r)).unwrap());
    }
    assert!(!all.contains(secret), "an environment value was returned");
    let r = c
        .call("logs", json!({"run_id": "big", "max_bytes": 100_000_000}))
        .await;
    assert_eq!(doc(&r)["truncated"], true);
    assert!(text(&r).len() <= 64 * 1024);
    c.close().await;
    env.assert_no_leftovers();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_leaves_the_run_and_a_cancelled_fanout_stops_its_tasks() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let r = c
        .call(
            "run",
            json!({"argv": ["sleep", "60"], "run_id": "bg", "wait": false, "grace": "1s"}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    // A cancelled `wait`: the waiting stops, the run goes on.
    let send = |name: &str, args: Value| {
        let params = CallToolRequestParams::new(name.to_owned())
            .with_arguments(args.as_object().unwrap().clone());
        let peer = c.svc.peer().clone();
        async move {
            peer.send_request_with_option(
                ClientRequest::CallToolRequest(CallToolRequest::new(params)),
                PeerRequestOptions::default(),
            )
            .await
            .unwrap()
        }
    };
    let h = send("wait", json!({"run_ids": ["bg"]})).await;
    let client = c.client.clone();
    until("the wait's first progress", move || {
        client.messages().iter().any(|m| m == "waiting for bg")
    })
    .await;
    h.cancel(None).await.unwrap();
    // The server's wait ended (it says so once the call is over), and the run goes on.
    let said = c.stderr.clone();
    until("the server to end the cancelled wait", move || {
        said.lock()
            .unwrap()
            .contains("`wait` call cancelled by the client")
    })
    .await;
    let r = c.call("status", json!({"run_id": "bg"})).await;
    assert_eq!(doc(&r)["status"], "running", "{}", doc(&r));

    // A cancelled `fanout`: the running tasks are cancelled and the queued ones skipped.
    let tasks: Vec<Value> = (0..4)
        .map(|i| json!({"argv": ["sleep", "60"], "run_id": format!("f{i}"), "grace": "1s"}))
        .collect();
    let h = send("fanout", json!({"tasks": tasks, "concurrency": 2})).await;
    let f0 = env.attempt_dir("f0", 1).join("spec.json");
    let f1 = env.attempt_dir("f1", 1).join("spec.json");
    until("two fan-out tasks to start", move || {
        f0.exists() && f1.exists()
    })
    .await;
    h.cancel(Some("enough".into())).await.unwrap();
    let (p0, p1) = (
        env.attempt_dir("f0", 1).join("result.json"),
        env.attempt_dir("f1", 1).join("result.json"),
    );
    until("the running tasks to end", move || {
        p0.exists() && p1.exists()
    })
    .await;
    for f in ["f0", "f1"] {
        let v = env.result(f);
        assert_eq!(v["status"], "cancelled", "{f}: {v}");
    }
    assert!(!env.run_dir("f2").exists() && !env.run_dir("f3").exists());
    let r = c.call("cancel", json!({"run_id": "bg"})).await;
    assert_eq!(doc(&r)["cancel_requested"], true);
    let r = c.call("wait", json!({"run_ids": ["bg"]})).await;
    assert_eq!(doc(&r)["runs"][0]["status"], "cancelled");
    c.close().await;
    env.assert_no_leftovers();
}

/// `subpane mcp` spoken to line by line, without a client library: what it writes, as it
/// comes, so a missing answer fails the test instead of hanging it.
struct Raw {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Raw {
    /// A server, initialized.
    fn start(env: &TestEnv) -> Raw {
        use std::io::{BufRead, BufReader};
        let mut child = env
            .cmd()
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let (tx, lines) = std::sync::mpsc::channel::<String>();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut raw = Raw {
            child,
            stdin,
            lines,
        };
        raw.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
            .to_string(),
        );
        assert_eq!(raw.next()["id"], 1);
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
        raw
    }

    fn send(&mut self, line: &str) {
        use std::io::Write;
        writeln!(self.stdin.as_mut().expect("stdin open"), "{line}").unwrap();
    }

    /// The next message the server writes; it must be JSON-RPC.
    fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(crate::harness::DEADLINE)
            .expect("a message on stdout");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line:?}"));
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        v
    }

    /// Closes stdin: the server's end of input.
    fn close(&mut self) {
        self.stdin = None;
    }

    /// Every message written after stdin closed, and how the server exited.
    fn finish(mut self) -> (Vec<Value>, std::process::ExitStatus) {
        self.close();
        let status = self.child.wait().unwrap();
        let rest = self.lines.iter().map(|l| {
            let v: Value = serde_json::from_str(&l).expect("JSON-RPC");
            assert_eq!(v["jsonrpc"], "2.0", "{v}");
            v
        });
        (rest.collect(), status)
    }
}

/// stdout is the protocol's: everything the server writes is a JSON-RPC message (a line
/// that is not JSON is answered with a parse error, and the session goes on).
#[test]
fn stdout_carries_only_protocol_messages() {
    let env = TestEnv::new();
    let mut raw = Raw::start(&env);
    raw.send("this is not json");
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run", "arguments": {"argv": ["sh", "-c", "echo to-the-pane; echo err >&2"]}}})
        .to_string(),
    );
    raw.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).to_string());
    // Answers to ids 2 and 3 (2 waits for its run), then end the session.
    let mut seen: Vec<Value> = Vec::new();
    while !(2..=3).all(|id| seen.iter().any(|v| v["id"] == id)) {
        seen.push(raw.next());
    }
    let (_, status) = raw.finish();
    assert!(status.success(), "{status}");
    let run = seen.iter().find(|v| v["id"] == 2).unwrap();
    assert_eq!(
        run["result"]["structuredContent"]["status"], "completed",
        "{run}"
    );
    env.assert_no_leftovers();
}

/// A pane that cannot start is an outcome, not a tool error: the `spawn` envelope.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_pane_cannot_start_answers_with_its_spawn_envelope() {
    let env = TestEnv::new();
    // tmux cannot make its socket under a regular file.
    let blocker = env.root.path().join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let sock = blocker.join("tmux.sock");
    let c = connect_with(&env, |cmd| {
        cmd.env("SUBPANE_TMUX_SOCKET", &sock);
    })
    .await;
    let r = c
        .call(
            "run",
            json!({"argv": ["true"], "run_id": "nopane", "detail": true}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert!(
        text(&r).starts_with("run nopane (attempt 1) failed (spawn)"),
        "{}",
        text(&r)
    );
    let mut v = doc(&r);
    v.as_object_mut()
        .unwrap()
        .remove("summary")
        .expect("a summary");
    assert_valid_envelope(&v);
    assert_eq!(v["failure_kind"], "spawn");
    assert_eq!(v, env.result("nopane"), "the answer is result.json");
    c.close().await;
    env.assert_no_leftovers();
}

/// One damaged record does not make `list` fail: the run is a row of its own, named, with
/// its problem, and the others are listed as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_names_a_damaged_run_and_lists_the_rest() {
    let env = TestEnv::new();
    for id in ["fine", "broken"] {
        let r = env.sp(["run", "--json", "--run-id", id, "--", "true"]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    // The worker makes its records durable after result.json: damaged while it still
    // lives, the record would be taken for not the worker's (a running attempt).
    let pid = env.worker_pid("broken");
    wait_until("the worker of run broken to exit", || {
        (!pid_alive(pid)).then_some(())
    });
    let result = env.attempt_dir("broken", 1).join("result.json");
    std::fs::remove_file(&result).unwrap();
    std::fs::write(&result, "{ not an envelope").unwrap();
    let c = connect(&env).await;
    let r = c.call("list", json!({})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let runs = doc(&r)["runs"].as_array().unwrap().clone();
    let row = |id: &str| runs.iter().find(|x| x["run_id"] == id).cloned();
    assert_eq!(row("fine").unwrap()["status"], "completed", "{runs:?}");
    let broken = row("broken").unwrap_or_else(|| panic!("{runs:?}"));
    assert_eq!(broken["status"], "damaged", "{broken}");
    assert!(
        broken["problem"]
            .as_str()
            .is_some_and(|p| p.contains("result.json")),
        "{broken}"
    );
    assert!(text(&r).contains("broken"), "{}", text(&r));
    c.close().await;
    env.assert_no_leftovers();
}

/// `wait` of the CLI and of the MCP server are one answer (`app::wait_answers`): the run that
/// finished first is the first end the wait saw, not the first run named, and both say which.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_the_server_agree_on_the_run_that_finished_first() {
    let env = TestEnv::new();
    let (late, early) = (
        crate::harness::start_waiting(&env, "late", 0),
        crate::harness::start_waiting(&env, "early", 3),
    );
    let c = connect(&env).await;
    let c = Arc::new(c);
    let c1 = c.clone();
    let call =
        tokio::spawn(async move { c1.call("wait", json!({"run_ids": ["late", "early"]})).await });
    c.client.said("waiting for late, early").await;
    // The CLI's `wait --any` at the same time: whenever it begins, early is the only end.
    let cli = env
        .cmd()
        .args(["wait", "--any", "--json", "late", "early"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    crate::harness::touch(&early);
    let cli: crate::harness::Ran = tokio::task::spawn_blocking(move || cli.wait_with_output())
        .await
        .unwrap()
        .unwrap()
        .into();
    assert_eq!(cli.code, 1, "early failed (it exits 3): {cli:?}");
    assert_eq!(cli.json()["run_id"], "early");
    crate::harness::touch(&late);
    let r = call.await.unwrap();
    let v = doc(&r);
    assert_eq!(v["first_finished"], "early", "{v}");
    assert_eq!(
        v["runs"][0]["run_id"], "early",
        "in the order they ended: {v}"
    );
    Arc::into_inner(c).expect("the only handle").close().await;
    env.assert_no_leftovers();
}

/// The end of a command's stdout is one policy (`app::ends`) for the CLI's summary and the
/// server's answer: whole lines (the one the window cuts is left out), control characters
/// shown as text. Here both sizes come to the same 20 lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_the_server_show_the_same_end_of_stdout() {
    use subpane::app::{EndSize, output_end};
    let env = TestEnv::new();
    // 31 lines of 100 bytes: an answer's 2 KiB end holds 20 of them and a part of one more.
    let script = r"for i in $(seq 1 31); do printf 'line-%02d \033[1m%087d\n' $i 0; done";
    let r = env.sp(["run", "--run-id", "ends", "--", "sh", "-c", script]);
    assert_eq!(r.code, 0, "{r:?}");
    let cli = env.sp(["status", "ends"]);
    let note = "(last 20 lines of stdout; `subpane logs ends` has all)\n";
    let shown = cli
        .stdout
        .split_once(note)
        .unwrap_or_else(|| panic!("no note: {}", cli.stdout))
        .1
        .to_owned();
    let c = connect(&env).await;
    let r = c.call("status", json!({"run_id": "ends"})).await;
    let tail = doc(&r)["tails"]["stdout"].as_str().unwrap().to_owned();
    assert_eq!(shown, tail, "the CLI and the server show different ends");
    assert!(shown.starts_with("line-12 ^[[1m000"), "{shown}");
    assert!(shown.ends_with("line-31 ^[[1m{}\n".replace("{}", &"0".repeat(87)).as_str()));
    assert!(text(&r).contains(&tail), "{}", text(&r));
    let log = env.attempt_dir("ends", 1).join("stdout.log");
    assert_eq!(output_end(&log, EndSize::ANSWER).unwrap().text, tail);
    assert_eq!(output_end(&log, EndSize::TERMINAL).unwrap().text, shown);
    c.close().await;
    env.assert_no_leftovers();
}

/// A call that waits answers within its `max_wait` with the run still going, and says what
/// to call next; the run goes on and `wait` later gets its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_answers_within_max_wait_and_the_run_goes_on() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let flag = env.root.path().join("go");
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; echo done",
        flag.display()
    );
    let t0 = Instant::now();
    let r = c
        .call(
            "run",
            json!({"argv": ["sh", "-c", script], "run_id": "slow", "max_wait": "1s"}),
        )
        .await;
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(doc(&r)["status"], "running", "{}", doc(&r));
    assert!(
        text(&r).contains("still running after max_wait"),
        "{}",
        text(&r)
    );
    assert!(text(&r).contains("`wait`"), "{}", text(&r));
    // What to call next, as a call a client can make as it is.
    let next = json!({"tool": "wait", "arguments": {"run_ids": ["slow"]}});
    assert_eq!(doc(&r)["next"], next, "{}", doc(&r));
    let keys: Vec<String> = doc(&r).as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys[..2], ["summary", "next"], "{keys:?}");
    // `wait` too answers within its max_wait, the run still going, and says the same next.
    let r = c
        .call("wait", json!({"run_ids": ["slow"], "max_wait": "500ms"}))
        .await;
    assert_eq!(doc(&r)["max_wait_passed"], true, "{}", doc(&r));
    assert_eq!(doc(&r)["runs"][0]["status"], "running", "{}", doc(&r));
    assert_eq!(doc(&r)["next"], next, "{}", doc(&r));
    std::fs::write(&flag, "").unwrap();
    let r = c.call("wait", json!({"run_ids": ["slow"]})).await;
    assert_eq!(doc(&r)["runs"][0]["status"], "completed", "{}", doc(&r));
    assert!(doc(&r).get("next").is_none(), "{}", doc(&r));
    c.close().await;
    env.assert_no_leftovers();
}

/// `retry`: the next attempt of a run that ended, answered like `run`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_starts_the_next_attempt() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let marker = env.root.path().join("second");
    let script = format!(
        "[ -e '{0}' ] && echo ok || {{ touch '{0}'; exit 3; }}",
        marker.display()
    );
    let r = c
        .call(
            "run",
            json!({"argv": ["sh", "-c", script], "run_id": "flaky"}),
        )
        .await;
    assert_eq!(doc(&r)["status"], "failed", "{}", doc(&r));
    let r = c.call("retry", json!({"run_id": "flaky"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(doc(&r)["attempt"], 2, "{}", doc(&r));
    assert_eq!(doc(&r)["status"], "completed", "{}", doc(&r));
    assert!(
        text(&r).starts_with("run flaky (attempt 2) completed"),
        "{}",
        text(&r)
    );
    let r = c
        .call(
            "retry",
            json!({"run_id": "flaky", "task": "@more", "resume": true}),
        )
        .await;
    assert!(is_error(&r), "{}", text(&r));
    assert!(text(&r).contains("is a command"), "{}", text(&r));
    c.close().await;
    env.assert_no_leftovers();
}

/// Long labels, long argv and many runs: every answer stays one message under 64 KiB (see
/// [`Conn::check`]), and says what it left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_stay_small_with_huge_records_and_many_runs() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let label = "L".repeat(100_000);
    for i in 0..3 {
        let r = c
            .call(
                "run",
                json!({"argv": ["echo", "x".repeat(100_000)], "run_id": format!("big{i}"),
                       "labels": {"huge": label}}),
            )
            .await;
        assert!(!is_error(&r), "{}", text(&r));
    }
    let tasks: Vec<Value> = (0..40)
        .map(|i| {
            json!({"argv": ["sh", "-c", format!("echo {}", "y".repeat(5000))],
                   "run_id": format!("many{i}"), "labels": {"huge": label}})
        })
        .collect();
    let r = c
        .call("fanout", json!({"tasks": tasks, "concurrency": 8}))
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let group = doc(&r)["group"].as_str().unwrap().to_owned();
    let r = c.call("list", json!({"limit": 500})).await;
    // 3 runs, 40 tasks, and the run that drove them.
    assert_eq!(doc(&r)["total"], 44);
    // Each row's long texts are cut, so every row fits; the text names 30 and says where
    // the rest are.
    let runs = doc(&r)["runs"].as_array().unwrap().clone();
    assert_eq!(runs.len(), 44);
    assert!(runs[0]["labels"]["huge"].as_str().unwrap().len() < 1000);
    assert!(
        text(&r).contains("… 14 more in the structured content"),
        "{}",
        text(&r)
    );
    let r = c.call("wait", json!({"group": group})).await;
    assert!(
        text(&r).starts_with("40 runs: 40 completed"),
        "{}",
        text(&r)
    );
    let r = c.call("status", json!({"run_id": "big0"})).await;
    assert_eq!(doc(&r)["status"], "completed");
    let r = c
        .call("logs", json!({"run_id": "big0", "max_bytes": 1_000_000}))
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    c.close().await;
    env.assert_no_leftovers();
}

/// A line that is not JSON gets -32700, JSON that is no request -32600, and `arguments` that are not an object -32602; the
/// server goes on. Closing stdin with a call in flight: the server exits within 2 s, and
/// the run it started goes on to its end.
#[test]
fn bad_lines_get_json_rpc_errors_and_closing_stdin_ends_the_server_at_once() {
    let env = TestEnv::new();
    let mut raw = Raw::start(&env);
    raw.send("this is not json");
    let v = raw.next();
    assert_eq!(v["error"]["code"], -32700, "{v}");
    assert_eq!(v["id"], Value::Null, "{v}");
    // JSON, but not a request: JSON-RPC's -32600, id null.
    for line in ["{}", "[1,2,3]", "7"] {
        raw.send(line);
        let v = raw.next();
        assert_eq!(v["error"]["code"], -32600, "{line}: {v}");
        assert_eq!(v["id"], Value::Null, "{line}: {v}");
    }
    let array_args = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "list", "arguments": [1, 2]}});
    raw.send(&array_args.to_string());
    let v = raw.next();
    assert_eq!(v["id"], 2, "{v}");
    assert_eq!(v["error"]["code"], -32602, "{v}");
    // A run whose call is in flight when stdin closes.
    let flag = env.root.path().join("go");
    let script = format!("while [ ! -e '{}' ]; do sleep 0.05; done", flag.display());
    let run = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "run", "arguments": {"argv": ["sh", "-c", script], "run_id": "held"}}});
    raw.send(&run.to_string());
    let launched = env.attempt_dir("held", 1).join("launch.json");
    wait_until("the held run to start", || launched.exists().then_some(()));
    let t0 = Instant::now();
    raw.close();
    let pid = raw.child.id() as i32;
    wait_until("the server to exit", || (!pid_alive(pid)).then_some(()));
    let took = t0.elapsed();
    let (_, status) = raw.finish();
    assert!(
        took < Duration::from_secs(2),
        "the server took {took:?} to exit"
    );
    assert!(status.success(), "{status}");
    assert_eq!(env.sp(["status", "held"]).code, 3, "the run goes on");
    std::fs::write(&flag, "").unwrap();
    let r = env.sp(["wait", "--json", "held"]);
    assert_eq!(r.code, 0, "{r:?}");
    env.assert_no_leftovers();
}

/// `list` pages: 80 runs in pages of 30, by `offset` and `next_offset`, each run once,
/// newest first across the pages; past the end, an empty last page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_through_eighty_runs() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let tasks: Vec<Value> = (0..80)
        .map(|i| json!({"argv": ["true"], "run_id": format!("p{i:02}"), "labels": {"page": "yes"}}))
        .collect();
    let r = c
        .call("fanout", json!({"tasks": tasks, "concurrency": 16}))
        .await;
    assert_eq!(doc(&r)["status"], "ended", "{}", doc(&r));
    let mut seen = Vec::new();
    let mut offset = 0;
    let mut pages = 0;
    loop {
        let r = c
            .call(
                "list",
                json!({"labels": {"page": "yes"}, "limit": 30, "offset": offset}),
            )
            .await;
        let v = doc(&r);
        assert_eq!(v["total"], 80, "{v}");
        assert_eq!(v["offset"], offset, "{v}");
        let runs = v["runs"].as_array().unwrap();
        seen.extend(
            runs.iter()
                .map(|r| r["run_id"].as_str().unwrap().to_owned()),
        );
        pages += 1;
        assert!(
            v["summary"].as_str().unwrap().starts_with("80 runs match"),
            "{v}"
        );
        if v["more"] == false {
            assert_eq!(v["next_offset"], Value::Null, "{v}");
            break;
        }
        assert_eq!(runs.len(), 30, "{v}");
        assert!(
            text(&r).contains("call `list` again with offset"),
            "{}",
            text(&r)
        );
        offset = v["next_offset"].as_u64().unwrap() as usize;
        assert!(pages < 10, "no end to the pages");
    }
    assert_eq!(pages, 3);
    let mut all = seen.clone();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 80, "each run once: {seen:?}");
    // Past the end: no rows, nothing more.
    let r = c
        .call("list", json!({"labels": {"page": "yes"}, "offset": 500}))
        .await;
    assert_eq!(doc(&r)["runs"], json!([]));
    assert_eq!(doc(&r)["more"], false);
    c.close().await;
    env.assert_no_leftovers();
}

/// A fan-out still going at `max_wait` says so: status `running` with how many run and wait,
/// no exit code or duration it does not have yet, and `next` is the `wait` for its group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_fanout_says_running_and_what_to_call_next() {
    let env = TestEnv::new();
    let c = connect(&env).await;
    let flag = env.root.path().join("go");
    let script = format!("while [ ! -e '{}' ]; do sleep 0.05; done", flag.display());
    let tasks: Vec<Value> = (0..3)
        .map(|i| json!({"argv": ["sh", "-c", script], "run_id": format!("h{i}")}))
        .collect();
    let r = c
        .call(
            "fanout",
            json!({"tasks": tasks, "concurrency": 2, "max_wait": "1s"}),
        )
        .await;
    let v = doc(&r);
    let group = v["group"].as_str().unwrap().to_owned();
    assert_eq!(v["status"], "running", "{v}");
    assert_eq!(v["max_wait_passed"], true, "{v}");
    let counts = &v["counts"];
    assert_eq!(counts["total"], 3, "{v}");
    assert_eq!(
        counts["running"].as_u64().unwrap() + counts["queued"].as_u64().unwrap_or(0),
        3,
        "{v}"
    );
    assert!(counts.get("exit_code").is_none(), "{v}");
    assert!(counts.get("duration_ms").is_none(), "{v}");
    assert_eq!(
        v["next"],
        json!({"tool": "wait", "arguments": {"group": group}}),
        "{v}"
    );
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys[..2], ["summary", "next"], "{keys:?}");
    let t = text(&r);
    assert!(
        t.starts_with(&format!("group {group} running: 3 tasks")),
        "{t}"
    );
    assert!(!t.contains(" in 0.0s") && !t.contains("exit 3"), "{t}");
    // `wait` for the group says the same while it runs, and the end once it has ended.
    let r = c
        .call("wait", json!({"group": group, "max_wait": "300ms"}))
        .await;
    assert_eq!(doc(&r)["group"]["status"], "running", "{}", doc(&r));
    assert_eq!(doc(&r)["next"]["arguments"]["group"], group.as_str());
    std::fs::write(&flag, "").unwrap();
    let r = c.call("wait", json!({"group": group})).await;
    let v = doc(&r);
    assert_eq!(v["group"]["status"], "ended", "{v}");
    assert_eq!(v["group"]["counts"]["exit_code"], 0, "{v}");
    assert!(v.get("next").is_none(), "{v}");
    c.close().await;
    env.assert_no_leftovers();
}

/// The tools on a run that lives on a host: `run` with `host` (waiting and not), `status`,
/// `wait`, `logs`, `cancel` and `list`, answered as for a run here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_work_on_a_run_on_a_host() {
    let h = tokio::task::spawn_blocking(crate::hosts_run::Host::new)
        .await
        .unwrap();
    let path = h.sshd.path_env();
    let c = connect_with(&h.env, |cmd| {
        cmd.env("PATH", &path);
    })
    .await;
    let r = c
        .call(
            "run",
            json!({"host": "loop", "run_id": "m-far", "argv": ["sh", "-c", "echo far away"]}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(doc(&r)["status"], "completed", "{}", text(&r));
    let env = h.env.result("m-far");
    assert_valid_envelope(&env);
    assert_eq!(env["host"]["name"], "loop");
    let r = c.call("status", json!({"run_id": "m-far"})).await;
    assert_eq!(doc(&r)["status"], "completed", "{}", text(&r));
    let r = c.call("logs", json!({"run_id": "m-far"})).await;
    assert!(text(&r).contains("far away"), "{}", text(&r));
    let r = c.call("retry", json!({"run_id": "m-far"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(doc(&r)["attempt"], 2, "{}", text(&r));
    assert_eq!(doc(&r)["status"], "completed", "{}", text(&r));
    let r = c.call("list", json!({})).await;
    let runs = doc(&r)["runs"].clone();
    assert!(
        runs.as_array()
            .unwrap()
            .iter()
            .any(|r| r["run_id"] == "m-far"),
        "{runs}"
    );
    // Not waited for, then cancelled and waited for.
    let r = c
        .call(
            "run",
            json!({"host": "loop", "run_id": "m-long", "argv": ["sleep", "60"], "wait": false}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let r = c.call("cancel", json!({"run_id": "m-long"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let r = c.call("wait", json!({"run_ids": ["m-long"]})).await;
    assert_eq!(doc(&r)["runs"][0]["status"], "cancelled", "{}", text(&r));
    assert_eq!(
        result_status(&h.env, "m-long").as_deref(),
        Some("cancelled")
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_tools_work_on_a_run_on_a_slurm_host() {
    let cl = tokio::task::spawn_blocking(|| {
        let c = crate::slurm::Cluster::new();
        c.add("later", &["--sbatch-arg=--begin=now+3600"]);
        c
    })
    .await
    .unwrap();
    let conf = cl.cluster.conf.clone();
    let c = connect_with(&cl.env, |cmd| {
        cmd.env("SLURM_CONF", &conf);
    })
    .await;
    let r = c
        .call(
            "run",
            json!({"host": "hpc", "run_id": "ms-1", "argv": ["sh", "-c", "echo on a node"]}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    assert_eq!(doc(&r)["status"], "completed", "{}", text(&r));
    let env = cl.env.result("ms-1");
    assert_valid_envelope(&env);
    assert_eq!(env["host"]["kind"], "slurm");
    let r = c.call("logs", json!({"run_id": "ms-1"})).await;
    assert!(text(&r).contains("on a node"), "{}", text(&r));
    // Queued: said so with Slurm's reason; cancelled from the queue.
    let r = c
        .call(
            "run",
            json!({"host": "later", "run_id": "ms-q", "argv": ["true"], "wait": false}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let r = c.call("status", json!({"run_id": "ms-q"})).await;
    assert_eq!(doc(&r)["status"], "queued", "{}", text(&r));
    assert_eq!(doc(&r)["slurm"]["reason"], "BeginTime", "{}", text(&r));
    let r = c.call("cancel", json!({"run_id": "ms-q"})).await;
    assert!(!is_error(&r), "{}", text(&r));
    let r = c.call("wait", json!({"run_ids": ["ms-q"]})).await;
    assert_eq!(doc(&r)["runs"][0]["status"], "cancelled", "{}", text(&r));
    c.close().await;
    drop(cl);
}

/// A `run` of an agent that works on for many turns (each tool call 0.1 s) says, while it
/// waits, what the agent has used so far (tokens, tool calls) as its `progress.json` changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_run_says_the_usage_so_far() {
    let env = TestEnv::new();
    let mock = crate::mock::Mock::start(&env);
    let c = connect_with(&env, |cmd| mock.point(cmd, None)).await;
    let r = c
        .call(
            "run",
            json!({"agent": "pi", "run_id": "u1", "cwd": env.work, "timeout": "2m",
                   "tools": ["bash"],
                   "task": "SCENARIO:many_turns PAUSE:0.1 Keep going."}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let msgs = c.client.messages();
    let so_far: Vec<&String> = msgs.iter().filter(|m| m.contains("; so far ")).collect();
    assert!(
        so_far
            .iter()
            .any(|m| m.starts_with("run u1 running for ") && m.contains(" tokens")),
        "no message with the usage so far: {msgs:?}"
    );
    assert!(
        so_far.iter().any(|m| m.contains("tool call")),
        "no message with the tool calls so far: {msgs:?}"
    );
    c.close().await;
    env.assert_no_leftovers();
}

/// The `fanout` tool's group budget (`max_tokens`) reaches the group's driver (group.json's
/// `budget`): the pi tasks that work on for many turns are stopped as `budget`, the queued
/// one skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fanouts_group_budget_stops_its_tasks() {
    let env = TestEnv::new();
    let mock = crate::mock::Mock::start(&env);
    let c = connect_with(&env, |cmd| mock.point(cmd, None)).await;
    let task = |id: &str| {
        json!({"agent": "pi", "run_id": id, "cwd": env.work, "tools": ["bash"],
               "timeout": "2m", "task": "SCENARIO:many_turns PAUSE:0.1 Keep going."})
    };
    let r = c
        .call(
            "fanout",
            json!({"tasks": [task("g1"), task("g2"), task("g3")], "concurrency": 2,
                   "max_tokens": 1000, "max_wait": "50s"}),
        )
        .await;
    assert!(!is_error(&r), "{}", text(&r));
    let v = doc(&r);
    assert_eq!(v["status"], "ended", "{v}");
    assert_eq!(v["counts"]["failed"], 2, "{v}");
    assert_eq!(v["counts"]["skipped"], 1, "{v}");
    let group = v["group"].as_str().unwrap().to_owned();
    let record = env.read_json(&env.home.join("groups").join(&group).join("group.json"));
    assert_eq!(record["budget"]["max_tokens"], 1000, "{record}");
    for id in ["g1", "g2"] {
        let e = env.result(id);
        assert_eq!(e["failure_kind"], "budget", "{e:#}");
        assert_eq!(e["budget"]["group"], group.as_str(), "{e:#}");
    }
    c.close().await;
    env.assert_no_leftovers();
}
