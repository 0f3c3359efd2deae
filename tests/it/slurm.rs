//! A Slurm partition as a host, against the test's own single-node cluster: recorded,
//! checked through Slurm's own commands, and refused where runs there are not done yet.

use crate::harness::{BIN, Ran, TestEnv};
use crate::harness_slurm::{PARTITION, SlurmCluster};

fn sp(env: &TestEnv, cluster: &SlurmCluster, args: &[&str]) -> Ran {
    env.cmd()
        .env("SLURM_CONF", &cluster.conf)
        .args(args)
        .output()
        .unwrap()
        .into()
}

#[test]
fn a_slurm_host_is_recorded_and_checked_through_sinfo_and_srun() {
    let env = TestEnv::new();
    let cluster = SlurmCluster::start(env.root.path());
    let shared = env.root.path().join("shared");
    let url = format!("slurm://{PARTITION}");
    let add = sp(
        &env,
        &cluster,
        &[
            "hosts",
            "add",
            "hpc",
            &url,
            "--remote-home",
            shared.to_str().unwrap(),
            "--bin",
            BIN,
            "--time-limit",
            "10",
            "--sbatch-arg=--mem=100M",
        ],
    );
    assert_eq!(add.code, 0, "{add:?}");
    let ls = sp(&env, &cluster, &["hosts", "ls", "--json"]).json();
    assert_eq!(ls[0]["url"], url.as_str(), "{ls}");
    assert_eq!(ls[0]["slurm"]["time_limit"], "10", "{ls}");
    assert_eq!(ls[0]["slurm"]["sbatch_args"][0], "--mem=100M", "{ls}");
    let check = sp(&env, &cluster, &["hosts", "check", "hpc", "--json"]);
    assert_eq!(check.code, 0, "{check:?}");
    let v = check.json();
    let p = &v["slurm"]["partition"];
    assert_eq!(p["partition"], PARTITION, "{v}");
    assert_eq!(p["avail"], "up", "{v}");
    assert_eq!(p["nodes"], 1, "{v}");
    assert_eq!(p["nodelist"][0], cluster.node.as_str(), "{v}");
    assert_eq!(
        v["slurm"]["node_version"],
        format!("subpane {}", v["local_version"].as_str().unwrap()),
        "a node ran this binary: {v}"
    );
    let text = sp(&env, &cluster, &["hosts", "check", "hpc"]);
    assert_eq!(text.code, 0, "{text:?}");
    assert!(
        text.stdout.contains(&format!("partition {PARTITION} (up)")),
        "{text:?}"
    );
}

#[test]
fn a_partition_slurm_lacks_and_bad_slurm_options_are_clear_errors() {
    let env = TestEnv::new();
    let cluster = SlurmCluster::start(env.root.path());
    let shared = env.root.path().join("shared");
    let shared = shared.to_str().unwrap();
    let r = sp(
        &env,
        &cluster,
        &[
            "hosts",
            "add",
            "nope",
            "slurm://nosuch",
            "--remote-home",
            shared,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let c = sp(&env, &cluster, &["hosts", "check", "nope"]);
    assert_eq!(c.code, 1, "{c:?}");
    assert!(c.stderr.contains("no partition `nosuch`"), "{c:?}");
    for (args, says) in [
        (
            &["hosts", "add", "a", "slurm://debug"][..],
            "needs --remote-home",
        ),
        (
            &["hosts", "add", "a", "ssh://h", "--qos", "q"],
            "are for a Slurm host",
        ),
        (
            &[
                "hosts",
                "add",
                "a",
                "slurm://debug",
                "--remote-home",
                shared,
                "--sbatch-arg",
                "gpu",
            ],
            "is not an option of sbatch",
        ),
        (&["hosts", "add", "a", "slurm://-p"], "bad partition"),
    ] {
        let r = sp(&env, &cluster, args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(
            r.stderr.contains(says),
            "{args:?} should say {says:?}: {r:?}"
        );
    }
}

/// The test's cluster, and the host `hpc` on it whose shared home is `shared`. Dropped in
/// this order: the cluster (its jobs cancelled, its daemons ended) before the test's
/// directory that holds its state and munge socket.
pub struct Cluster {
    pub cluster: SlurmCluster,
    pub env: TestEnv,
    pub shared: std::path::PathBuf,
}

impl Cluster {
    pub fn new() -> Self {
        let env = TestEnv::new();
        let cluster = SlurmCluster::start(env.root.path());
        let shared = env.root.path().join("shared");
        let c = Cluster {
            env,
            cluster,
            shared,
        };
        c.add("hpc", &[]);
        c
    }

    pub fn add(&self, name: &str, more: &[&str]) {
        let url = format!("slurm://{PARTITION}");
        let mut args = vec![
            "hosts",
            "add",
            name,
            &url,
            "--remote-home",
            self.shared.to_str().unwrap(),
            "--bin",
            BIN,
        ];
        args.extend_from_slice(more);
        let r = self.sp(&args);
        assert_eq!(r.code, 0, "{r:?}");
    }

    fn sp(&self, args: &[&str]) -> Ran {
        sp(&self.env, &self.cluster, args)
    }

    fn json(&self, args: &[&str]) -> (i32, serde_json::Value) {
        let r = self.sp(args);
        let v = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {r:?}"));
        (r.code, v)
    }

    /// `squeue`'s state of `job` (every state: a job that ended is known for a while).
    fn job_state(&self, job: &str) -> String {
        let out = self
            .cluster
            .cmd("squeue")
            .args(["--noheader", "--states=all", "--format=%T", "--jobs", job])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn status(&self, run: &str) -> serde_json::Value {
        self.json(&["status", run, "--json"]).1
    }
}

#[test]
fn a_run_on_a_slurm_host_is_one_batch_job_with_the_same_envelope() {
    let c = Cluster::new();
    let (code, env) = c.json(&[
        "run",
        "--host",
        "hpc",
        "--run-id",
        "s-1",
        "--json",
        "--",
        "sh",
        "-c",
        "echo hello from $SLURM_JOB_ID; exit 3",
    ]);
    assert_eq!(code, 1, "a failed command is exit 1, as here: {env}");
    crate::harness::assert_valid_envelope(&env);
    assert_eq!(env["status"], "failed", "{env}");
    assert_eq!(env["exit_code"], 3, "{env}");
    assert_eq!(env["host"]["name"], "hpc", "{env}");
    assert_eq!(env["host"]["kind"], "slurm", "{env}");
    let job = env["host"]["job_id"].as_str().unwrap().to_owned();
    assert!(job.bytes().all(|b| b.is_ascii_digit()), "{env}");
    // The job ended with its worker, and Slurm says it completed (its script's exit code
    // is the envelope's).
    crate::harness::wait_until("the job to leave the queue", || {
        let s = c.job_state(&job);
        (s != "RUNNING" && s != "COMPLETING" && s != "PENDING").then_some(s)
    });
    // The attempt ran on the node with the shared home, and saw its job.
    let out = std::fs::read_to_string(c.shared.join("runs/s-1/attempts/1/stdout.log")).unwrap();
    assert_eq!(out.trim(), format!("hello from {job}"));
    // Recorded here as any run on a host; the request with its values is gone.
    assert_eq!(c.env.result("s-1"), env);
    assert!(!c.shared.join("slurm/s-1/request.json").exists());
    // Verbs by the run id.
    let st = c.status("s-1");
    assert_eq!(st["status"], "failed", "{st}");
    let logs = c.sp(&["logs", "s-1"]);
    assert_eq!(logs.code, 0, "{logs:?}");
    assert!(logs.stdout.contains("hello from"), "{logs:?}");
    let (_, rows) = c.json(&["ls", "--json"]);
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == "s-1")
        .cloned()
        .unwrap();
    assert_eq!(row["host"], "hpc", "{row}");
    assert_eq!(row["status"], "failed", "{row}");
    assert_eq!(row["slurm"]["job_id"], job.as_str(), "{row}");
    let text = c.sp(&["ls"]);
    assert!(text.stdout.contains(&format!("hpc:{job}")), "{text:?}");
}

#[test]
fn a_job_slurm_refuses_starts_nothing() {
    let c = Cluster::new();
    let r = c.sp(&[
        "hosts",
        "add",
        "bad",
        "slurm://nosuch",
        "--remote-home",
        c.shared.to_str().unwrap(),
        "--bin",
        BIN,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = c.sp(&["run", "--host", "bad", "--run-id", "no-1", "--", "true"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("Slurm refused the job"), "{r:?}");
    assert!(!c.env.home.join("runs/no-1").exists());
    assert!(!c.shared.join("slurm/no-1").exists());
    // A request the shared home's planner refuses is refused before any job.
    let r = c.sp(&[
        "run",
        "--host",
        "hpc",
        "--run-id",
        "no-2",
        "--cwd",
        "/nowhere/at/all",
        "--",
        "true",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("/nowhere/at/all"), "{r:?}");
    assert!(!c.env.home.join("runs/no-2").exists());
    assert!(!c.shared.join("slurm/no-2").exists());
}

#[test]
fn a_queued_job_says_why_and_a_cancel_takes_it_from_the_queue() {
    let c = Cluster::new();
    c.add("later", &["--sbatch-arg=--begin=now+3600"]);
    let (code, started) = c.json(&[
        "run", "--host", "later", "--detach", "--run-id", "q-1", "--json", "--", "true",
    ]);
    assert_eq!(code, 0, "{started}");
    assert_eq!(started["status"], "queued", "{started}");
    let st = c.status("q-1");
    assert_eq!(st["status"], "queued", "{st}");
    assert_eq!(st["slurm"]["state"], "PENDING", "{st}");
    assert_eq!(st["slurm"]["reason"], "BeginTime", "{st}");
    let job = st["slurm"]["job_id"].as_str().unwrap().to_owned();
    let (_, rows) = c.json(&["ls", "--json"]);
    assert_eq!(rows[0]["status"], "queued", "{rows}");
    let w = c.sp(&["wait", "q-1", "--timeout", "300ms", "--json"]);
    assert_eq!(w.code, 3, "still queued: {w:?}");
    let (code, env) = c.json(&["cancel", "q-1", "--json"]);
    assert_eq!(code, 0, "{env}");
    assert_eq!(env["status"], "cancelled", "{env}");
    assert_eq!(env["cancelled_by"], "cancel", "{env}");
    assert_eq!(env["host"]["state"], "CANCELLED", "{env}");
    crate::harness::assert_valid_envelope(&env);
    assert_eq!(c.job_state(&job), "CANCELLED");
    assert!(!c.shared.join("runs/q-1").exists(), "it never ran");
}

/// Detaches `script` (which says `waiting` first) on `host` as `id`; waits until its
/// attempt runs on the node and has said it.
fn running(c: &Cluster, host: &str, id: &str, script: &str) -> String {
    let r = c.sp(&[
        "run", "--host", host, "--detach", "--run-id", id, "--", "sh", "-c", script,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let out = c.shared.join("runs").join(id).join("attempts/1/stdout.log");
    crate::harness::wait_until("the attempt running on the node", || {
        let said = std::fs::read_to_string(&out).is_ok_and(|s| s.contains("waiting"));
        let st = c.status(id);
        (said && st["status"] == "running")
            .then(|| st["slurm"]["job_id"].as_str().unwrap().to_owned())
    })
}

fn waits_forever(c: &Cluster) -> String {
    format!(
        "echo waiting; while [ ! -e {} ]; do sleep 0.05; done",
        c.env.root.path().join("never").display()
    )
}

#[test]
fn a_running_job_is_cancelled_through_its_worker() {
    let c = Cluster::new();
    let job = running(&c, "hpc", "c-1", &waits_forever(&c));
    let (code, env) = c.json(&["cancel", "c-1", "--json"]);
    assert_eq!(code, 0, "{env}");
    assert_eq!(env["status"], "cancelled", "{env}");
    assert_eq!(env["cancelled_by"], "cancel", "{env}");
    assert_eq!(
        env["signals_sent"][0], "SIGTERM",
        "the worker's ladder: {env}"
    );
    // The job ends with its worker, with the envelope's exit code (130: Slurm says FAILED).
    crate::harness::wait_until("the job to end with its worker", || {
        (c.job_state(&job) == "FAILED").then_some(())
    });
}

#[test]
fn a_job_cancelled_by_scancel_outside_subpane_is_recorded_as_cancelled() {
    let c = Cluster::new();
    let job = running(&c, "hpc", "x-1", &waits_forever(&c));
    let out = c.cluster.cmd("scancel").arg(&job).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let (code, env) = c.json(&["wait", "x-1", "--json"]);
    assert_eq!(code, 130, "{env}");
    assert_eq!(env["status"], "cancelled", "{env}");
    assert_eq!(env["cancelled_by"], "signal", "{env}");
    assert_eq!(env["host"]["state"], "CANCELLED", "{env}");
    crate::harness::assert_valid_envelope(&env);
}

#[test]
fn a_job_past_its_time_limit_is_a_timeout() {
    let c = Cluster::new();
    // Slurm's least limit is a minute, enforced at its next look (up to 30 s later).
    c.add("short", &["--time-limit", "1"]);
    let r = c.sp(&[
        "run",
        "--host",
        "short",
        "--run-id",
        "t-1",
        "--json",
        "--",
        "sh",
        "-c",
        &waits_forever(&c),
    ]);
    let env: serde_json::Value =
        serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    assert_eq!(r.code, 124, "{env}");
    assert_eq!(env["status"], "failed", "{env}");
    assert_eq!(env["failure_kind"], "timeout", "{env}");
    assert_eq!(env["host"]["state"], "TIMEOUT", "{env}");
}

#[test]
fn attach_reaches_the_jobs_pane_through_srun() {
    let c = Cluster::new();
    let go = c.env.root.path().join("go");
    let script = format!(
        "echo waiting; while [ ! -e {} ]; do sleep 0.05; done",
        go.display()
    );
    running(&c, "hpc", "a-1", &script);
    let conf = c.cluster.conf.display().to_string();
    let t = crate::terminal::Terminal::subpane(
        &c.env,
        "attach-job",
        (120, 30),
        &[("SLURM_CONF", conf.as_str())],
        &["attach", "a-1"],
    );
    t.wait_for("subpane ▸ run a-1 · attempt 1");
    t.wait_for("waiting");
    t.keys(&["C-]"]);
    t.wait_until("that the run goes on", |s| s.contains("detached; run"));
    assert_eq!(t.wait_exit(), 0);
    std::fs::write(&go, "").unwrap();
    let w = c.sp(&["wait", "a-1"]);
    assert_eq!(w.code, 0, "{w:?}");
}

#[test]
fn a_run_whose_slurmd_dies_ends_with_its_true_outcome() {
    let mut c = Cluster::new();
    let go = c.env.root.path().join("go");
    let script = format!(
        "echo waiting; while [ ! -e {} ]; do sleep 0.05; done; exit 4",
        go.display()
    );
    running(&c, "hpc", "d-1", &script);
    c.cluster.kill_slurmd();
    // The job's own processes run on without their daemon; its records say how it ends.
    std::fs::write(&go, "").unwrap();
    let (code, env) = c.json(&["wait", "d-1", "--json"]);
    assert_eq!(code, 1, "{env}");
    assert_eq!(env["status"], "failed", "{env}");
    assert_eq!(
        env["exit_code"], 4,
        "the program's own end, not a lost one: {env}"
    );
}

#[test]
fn a_fanout_submits_its_lines_for_the_cluster_as_jobs() {
    let c = Cluster::new();
    let mut lines = String::new();
    for k in 0..12 {
        let code = if k == 5 { 3 } else { 0 };
        lines.push_str(&format!(
            "{}\n",
            serde_json::json!({"argv": ["sh", "-c", format!("echo task {k}; exit {code}")],
                               "run_id": format!("f-{k}"), "host": "hpc"})
        ));
    }
    lines.push_str("{\"argv\": [\"true\"], \"run_id\": \"f-here\"}\n");
    let file = c.env.root.path().join("tasks.jsonl");
    std::fs::write(&file, &lines).unwrap();
    let r = c.sp(&[
        "fanout",
        file.to_str().unwrap(),
        "--concurrency",
        "4",
        "--json",
    ]);
    assert_eq!(r.code, 1, "one task failed: {r:?}");
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let tasks = report["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 13, "{report}");
    for t in tasks {
        let want = if t["run_id"] == "f-5" {
            "failed"
        } else {
            "completed"
        };
        assert_eq!(t["status"], want, "{report}");
    }
    let mut jobs = std::collections::HashSet::new();
    for k in 0..12 {
        let env = c.env.result(&format!("f-{k}"));
        assert_eq!(env["host"]["kind"], "slurm", "{env}");
        assert_eq!(env["group"], report["group"], "{env}");
        jobs.insert(env["host"]["job_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(jobs.len(), 12, "one job a task");
    // A line the cluster's home cannot plan is refused before anything starts.
    let bad = "{\"argv\": [\"true\"], \"host\": \"hpc\", \"cwd\": \"/nowhere/at/all\"}\n";
    std::fs::write(&file, bad).unwrap();
    let r = c.sp(&["fanout", file.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("line 1 (host hpc): "), "{r:?}");
}

#[test]
fn two_hundred_tasks_on_the_cluster_end_with_no_false_outcome() {
    let c = Cluster::new();
    let mut lines = String::new();
    for k in 0..200 {
        // Every seventh fails with its own code: each outcome is the task's own.
        let code = if k % 7 == 0 { 1 + k % 5 } else { 0 };
        lines.push_str(&format!(
            "{}\n",
            serde_json::json!({"argv": ["sh", "-c", format!("exit {code}")],
                               "run_id": format!("m-{k}"), "host": "hpc"})
        ));
    }
    let file = c.env.root.path().join("tasks.jsonl");
    std::fs::write(&file, &lines).unwrap();
    let r = c.sp(&[
        "fanout",
        file.to_str().unwrap(),
        "--concurrency",
        "24",
        "--json",
    ]);
    let report: serde_json::Value =
        serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    let tasks = report["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 200, "{report}");
    let mut false_outcomes = Vec::new();
    for t in tasks {
        let k: usize = t["run_id"].as_str().unwrap()[2..].parse().unwrap();
        let code = if k % 7 == 0 { 1 + k % 5 } else { 0 };
        let (status, exit) = (t["status"].as_str().unwrap(), t["exit_code"].as_i64());
        let right = match code {
            0 => status == "completed" && exit == Some(0),
            c => status == "failed" && exit == Some(c as i64),
        };
        if !right {
            false_outcomes.push(t.clone());
        }
    }
    assert!(
        false_outcomes.is_empty(),
        "false outcomes: {false_outcomes:?}"
    );
}

#[test]
fn a_retry_on_the_cluster_is_a_job_of_its_own() {
    let c = Cluster::new();
    let flag = c.env.root.path().join("second");
    // Fails the first time, completes once the flag exists.
    let script = format!(
        "[ -e {} ] && echo again && exit 0; touch {}; exit 3",
        flag.display(),
        flag.display()
    );
    let (code, first) = c.json(&[
        "run", "--host", "hpc", "--run-id", "r-1", "--json", "--", "sh", "-c", &script,
    ]);
    assert_eq!(code, 1, "{first}");
    let (code, env) = c.json(&["retry", "r-1", "--json"]);
    assert_eq!(code, 0, "{env}");
    assert_eq!(env["attempt"], 2, "{env}");
    assert_eq!(env["status"], "completed", "{env}");
    crate::harness::assert_valid_envelope(&env);
    assert_ne!(
        env["host"]["job_id"], first["host"]["job_id"],
        "a job of its own: {env}"
    );
    assert_eq!(c.status("r-1")["attempt"], 2);
    let out = std::fs::read_to_string(c.shared.join("runs/r-1/attempts/2/stdout.log")).unwrap();
    assert_eq!(out.trim(), "again");
    // Attempt 1's record here is as it was.
    let one: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(c.env.home.join("runs/r-1/attempts/1/result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(one["exit_code"], 3, "{one}");
    let (code, again) = c.json(&["status", "r-1", "--attempt", "1", "--json"]);
    assert_eq!((code, again["attempt"].as_u64()), (1, Some(1)), "{again}");
    // A retry of a run whose attempt has not ended is refused.
    c.add("later", &["--sbatch-arg=--begin=now+3600"]);
    let r = c.sp(&[
        "run", "--host", "later", "--detach", "--run-id", "r-2", "--", "true",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = c.sp(&["retry", "r-2"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("has not ended"), "{r:?}");
}

#[test]
fn top_shows_a_queued_job_and_cancels_it_from_the_queue() {
    let c = Cluster::new();
    c.add("later", &["--sbatch-arg=--begin=now+3600"]);
    let r = c.sp(&[
        "run", "--host", "later", "--detach", "--run-id", "tq-1", "--", "true",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let job = c.status("tq-1")["slurm"]["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let conf = c.cluster.conf.display().to_string();
    let t = crate::terminal::Terminal::subpane(
        &c.env,
        "top-slurm",
        (130, 30),
        &[("SLURM_CONF", conf.as_str())],
        &["top"],
    );
    let host = format!("later:{job}");
    t.wait_until("the queued job with its host, job and reason", |s| {
        s.lines().any(|l| {
            l.contains("tq-1")
                && l.contains("◌ queued")
                && l.contains(&host)
                && l.contains("BeginTime")
        })
    });
    t.keys(&["Home", "c"]);
    t.wait_for("cancel run tq-1? y to confirm");
    t.keys(&["y"]);
    t.wait_until("tq-1 cancelled", |s| {
        s.lines()
            .any(|l| l.contains("tq-1") && l.contains("■ cancelled"))
    });
    t.keys(&["q"]);
    assert_eq!(c.job_state(&job), "CANCELLED");
}

#[test]
fn a_job_that_ends_without_its_attempt_is_lost_with_what_it_said() {
    let c = Cluster::new();
    c.add("soon", &["--sbatch-arg=--begin=now+2"]);
    let r = c.sp(&[
        "run", "--host", "soon", "--detach", "--run-id", "gone-1", "--", "true",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(c.status("gone-1")["status"], "queued");
    // Its request taken from the shared home before the job starts: the job has nothing to
    // run, and says so.
    std::fs::remove_file(c.shared.join("slurm/gone-1/request.json")).unwrap();
    let (code, env) = c.json(&["wait", "gone-1", "--json"]);
    assert_eq!(code, 1, "{env}");
    assert_eq!(env["status"], "failed", "{env}");
    assert_eq!(env["failure_kind"], "lost", "{env}");
    assert_eq!(env["host"]["state"], "FAILED", "{env}");
    let errors = env["output"]["errors"].to_string();
    assert!(
        errors.contains("request.json"),
        "the job's own words: {env}"
    );
    crate::harness::assert_valid_envelope(&env);
}
