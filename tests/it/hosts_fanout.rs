//! Fan-outs whose tasks run on hosts (lines with "host", `fanout --hosts a,b`) against the
//! test's own sshd: two hosts with homes of their own, each planning its lines before
//! anything starts, the concurrency holding on each, and the group's runs found by `ls`
//! and `wait --group` here as one group.

use std::collections::HashMap;

use serde_json::Value;

use crate::harness::{Ran, assert_valid_envelope};
use crate::harness_ssh::ALIAS;
use crate::hosts_run::{Host, json, waits_for};

/// [`Host`] with a second host, `loop2`: the same sshd, a home of its own there.
fn two_hosts() -> (Host, std::path::PathBuf) {
    let h = Host::new();
    let home2 = h.env.root.path().join("remote-home-2");
    let add = h.sp([
        "hosts",
        "add",
        "loop2",
        &format!("ssh://{ALIAS}"),
        "--remote-home",
        home2.to_str().unwrap(),
        "--bin",
        crate::harness::BIN,
    ]);
    assert_eq!(add.code, 0, "{add:?}");
    (h, home2)
}

fn fanout(h: &Host, lines: &str, args: &[&str]) -> Ran {
    use std::io::Write;
    let mut c = h.cmd();
    c.arg("fanout").arg("-").args(args);
    c.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap().into()
}

fn runs_in(home: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(home.join("runs"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_fanout_runs_lines_on_their_hosts_and_spreads_the_rest() {
    let (h, home2) = two_hosts();
    // At most one at a time on each host.
    let mut lines = String::from(
        "{\"argv\": [\"sh\", \"-c\", \"echo here\"], \"run_id\": \"t-here\"}\n\
         {\"argv\": [\"sh\", \"-c\", \"exit 5\"], \"run_id\": \"t-fixed\", \"host\": \"loop2\"}\n",
    );
    for k in 0..4 {
        lines.push_str(&format!(
            "{{\"argv\": [\"sh\", \"-c\", \"sleep 0.2\"], \"run_id\": \"t-{k}\"}}\n"
        ));
    }
    // Lines without a host go to --hosts: here is not one of them.
    let r = fanout(
        &h,
        &lines.replace(
            "\"run_id\": \"t-here\"",
            "\"run_id\": \"t-here\", \"host\": \"loop\"",
        ),
        &["--hosts", "loop,loop2", "--concurrency", "1", "--json"],
    );
    assert_eq!(r.code, 1, "the worst task: exit 5 there: {r:?}");
    let report = json(&r);
    let tasks = report["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 6, "{report}");
    let by_id: HashMap<&str, &Value> = tasks
        .iter()
        .map(|t| (t["run_id"].as_str().unwrap(), t))
        .collect();
    assert_eq!(by_id["t-fixed"]["status"], "failed", "{report}");
    assert_eq!(by_id["t-fixed"]["exit_code"], 5, "{report}");
    let group = report["group"].as_str().unwrap();
    // Every run's envelope is recorded here, with its host and the group.
    let mut on = HashMap::new();
    for id in ["t-here", "t-fixed", "t-0", "t-1", "t-2", "t-3"] {
        let env = h.env.result(id);
        assert_valid_envelope(&env);
        assert_eq!(env["group"], group, "{env}");
        let host = env["host"]["name"].as_str().unwrap().to_owned();
        *on.entry(host).or_insert(0) += 1;
    }
    assert_eq!(h.env.result("t-fixed")["host"]["name"], "loop2");
    assert_eq!(h.env.result("t-here")["host"]["name"], "loop");
    // The four spread tasks went to both hosts, one at a time on each (their clocks are
    // this machine's: loopback).
    assert!(on["loop"] >= 2 && on["loop2"] >= 2, "{on:?}");
    for host in ["loop", "loop2"] {
        let mut spans: Vec<(String, String)> = ["t-here", "t-fixed", "t-0", "t-1", "t-2", "t-3"]
            .iter()
            .map(|id| h.env.result(id))
            .filter(|e| e["host"]["name"] == host)
            .map(|e| {
                (
                    e["started_at"].as_str().unwrap().to_owned(),
                    e["finished_at"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "two at once on {host}: {spans:?}");
        }
    }
    let there: Vec<String> = runs_in(&h.remote_home)
        .into_iter()
        .chain(runs_in(&home2))
        .collect();
    assert_eq!(there.len(), 6, "each run on exactly one host: {there:?}");
    // ls and wait --group here see the group's runs there.
    let ls = h.sp(["ls", "--group", group, "--json"]);
    assert_eq!(ls.code, 0, "{ls:?}");
    let rows = json(&ls);
    assert_eq!(rows.as_array().unwrap().len(), 6, "{rows}");
    let w = h.sp(["wait", "--group", group, "--json"]);
    assert_eq!(w.code, 1, "{w:?}");
    let answers = json(&w);
    assert_eq!(answers.as_array().unwrap().len(), 6, "{answers}");
}

#[test]
fn a_line_a_host_refuses_starts_nothing_anywhere() {
    let (h, home2) = two_hosts();
    let missing = h.env.root.path().join("nowhere");
    let lines = format!(
        "{{\"argv\": [\"true\"], \"run_id\": \"ok-here\"}}\n\
         {{\"argv\": [\"true\"], \"run_id\": \"ok-there\", \"host\": \"loop2\"}}\n\
         \n\
         {{\"argv\": [\"true\"], \"run_id\": \"bad-there\", \"host\": \"loop\", \"cwd\": \"{}\"}}\n\
         {{\"argv\": [\"true\"], \"host\": \"nohost\"}}\n",
        missing.display()
    );
    let r = fanout(&h, &lines, &["--json"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("line 4 (host loop): "), "{r:?}");
    assert!(r.stderr.contains("nowhere"), "{r:?}");
    assert!(r.stderr.contains("line 5: "), "{r:?}");
    assert!(r.stderr.contains("nohost"), "{r:?}");
    assert!(r.stderr.contains("nothing was started"), "{r:?}");
    assert!(h.local_runs().is_empty(), "{:?}", h.local_runs());
    assert!(runs_in(&h.remote_home).is_empty());
    assert!(runs_in(&home2).is_empty());
    // An unknown name in --hosts is refused too.
    let r = fanout(&h, "{\"argv\": [\"true\"]}\n", &["--hosts", "loop,gone"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("gone"), "{r:?}");
    assert!(h.local_runs().is_empty(), "{:?}", h.local_runs());
}

#[test]
fn a_failure_cancels_the_tasks_running_on_hosts() {
    let (h, _home2) = two_hosts();
    let never = h.env.root.path().join("never");
    let lines = format!(
        "{{\"argv\": [\"sh\", \"-c\", \"{}\"], \"run_id\": \"long-1\", \"host\": \"loop\"}}\n\
         {{\"argv\": [\"sh\", \"-c\", \"{}\"], \"run_id\": \"long-2\", \"host\": \"loop2\"}}\n\
         {{\"argv\": [\"sh\", \"-c\", \"sleep 0.3; exit 7\"], \"run_id\": \"fails\"}}\n",
        waits_for(&never),
        waits_for(&never)
    );
    let r = fanout(&h, &lines, &["--cancel-siblings", "--json"]);
    assert_eq!(r.code, 1, "{r:?}");
    let report = json(&r);
    for t in report["tasks"].as_array().unwrap() {
        let want = if t["run_id"] == "fails" {
            "failed"
        } else {
            "cancelled"
        };
        assert_eq!(t["status"], want, "{report}");
    }
    for id in ["long-1", "long-2"] {
        let env = h.env.result(id);
        assert_eq!(env["status"], "cancelled", "{env}");
        assert_eq!(env["cancelled_by"], "sibling", "{env}");
    }
}

#[test]
fn a_detached_fanout_drives_tasks_on_hosts_and_wait_group_answers_them() {
    let (h, _home2) = two_hosts();
    let lines = "{\"argv\": [\"sh\", \"-c\", \"echo one\"], \"run_id\": \"d-1\", \"host\": \"loop\"}\n\
                 {\"argv\": [\"sh\", \"-c\", \"echo two\"], \"run_id\": \"d-2\"}\n\
                 {\"argv\": [\"sh\", \"-c\", \"echo three\"], \"run_id\": \"d-3\"}\n";
    let r = fanout(&h, lines, &["--hosts", "loop2", "--detach"]);
    assert_eq!(r.code, 0, "{r:?}");
    let group = r.stdout.trim().to_owned();
    let w = h.sp(["wait", "--group", &group, "--json"]);
    assert_eq!(w.code, 0, "{w:?}");
    let answers = json(&w);
    let mut ids: Vec<&str> = answers
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["run_id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["d-1", "d-2", "d-3"], "{answers}");
    for a in answers.as_array().unwrap() {
        assert_eq!(a["status"], "completed", "{a}");
        assert_valid_envelope(a);
    }
    assert_eq!(h.env.result("d-2")["host"]["name"], "loop2");
}

#[test]
fn ctrl_c_of_a_fanout_cancels_its_tasks_on_hosts() {
    let (h, home2) = two_hosts();
    let never = h.env.root.path().join("never");
    let script = format!("echo waiting; {}", waits_for(&never));
    let line = |id: &str| {
        format!(
            "{}\n",
            serde_json::json!({"argv": ["sh", "-c", &script], "run_id": id})
        )
    };
    let lines = format!("{}{}{}", line("i-1"), line("i-2"), line("i-3"));
    let file = h.env.root.path().join("tasks.jsonl");
    std::fs::write(&file, lines).unwrap();
    let child = h
        .cmd()
        .args(["fanout", file.to_str().unwrap(), "--hosts", "loop,loop2"])
        .args(["--concurrency", "1", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // One runs on each host; the third waits for room.
    crate::harness::wait_until("a task running on each host", || {
        let on = |home: &std::path::Path| {
            runs_in(home).iter().any(|id| {
                std::fs::read_to_string(home.join("runs").join(id).join("attempts/1/stdout.log"))
                    .is_ok_and(|s| s.contains("waiting"))
            })
        };
        (on(&h.remote_home) && on(&home2)).then_some(())
    });
    crate::harness::send_signal(child.id() as i32, libc::SIGINT);
    let r: Ran = child.wait_with_output().unwrap().into();
    assert_eq!(r.code, 130, "{r:?}");
    let report = json(&r);
    let mut statuses: Vec<&str> = report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    statuses.sort();
    assert_eq!(statuses, ["cancelled", "cancelled", "skipped"], "{report}");
    for t in report["tasks"].as_array().unwrap() {
        if t["status"] == "cancelled" {
            let env = h.env.result(t["run_id"].as_str().unwrap());
            assert_eq!(env["cancelled_by"], "fanout", "{env}");
        }
    }
}

/// A detached group whose driver is killed while its task runs on a host: the next command
/// drives it again, the new driver waits for that run there (never starting it again) and
/// starts the rest.
#[test]
fn a_driver_started_again_waits_for_its_task_on_a_host() {
    let h = Host::new();
    let gate = h.env.root.path().join("gate");
    let script = format!("echo waiting; {}", waits_for(&gate));
    let lines = format!(
        "{}\n{}\n",
        serde_json::json!({"argv": ["sh", "-c", &script], "run_id": "ha-1", "host": "loop"}),
        serde_json::json!({"argv": ["true"], "run_id": "ha-2", "host": "loop"})
    );
    let r = fanout(&h, &lines, &["--detach", "--concurrency", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let group = r.stdout.trim().to_owned();
    let out = h.remote_home.join("runs/ha-1/attempts/1/stdout.log");
    crate::harness::wait_until("the task running there", || {
        std::fs::read_to_string(&out)
            .is_ok_and(|s| s.contains("waiting"))
            .then_some(())
    });
    crate::harness::kill_driver(&h.env, &group, 1);
    let l = h.sp(["ls"]);
    assert!(l.stderr.contains("driving it again"), "{}", l.stderr);
    std::fs::write(&gate, "").unwrap();
    let w = h.sp(["wait", "--group", &group, "--json"]);
    assert_eq!(w.code, 0, "{w:?}");
    for id in ["ha-1", "ha-2"] {
        assert!(
            !h.remote_home.join(format!("runs/{id}/attempts/2")).exists(),
            "{id} started twice"
        );
        assert_eq!(h.env.result(id)["status"], "completed", "{id}");
    }
}

/// `pause --group G --stop-running` stops the group's task on a host there too, and
/// `resume --group G` continues it.
#[test]
fn pausing_a_group_stops_its_task_on_a_host_there() {
    let h = Host::new();
    let go = h.env.root.path().join("go");
    let lines = format!(
        "{}\n",
        serde_json::json!({"argv": ["sh", "-c", waits_for(&go)], "run_id": "hs-1", "host": "loop"})
    );
    let r = fanout(&h, &lines, &["--detach"]);
    assert_eq!(r.code, 0, "{r:?}");
    let group = r.stdout.trim().to_owned();
    let agent = crate::harness::agent_pid_in(&h.remote_home.join("runs/hs-1/attempts/1"));
    let state = || crate::harness::process_state(agent);
    let p = h.sp(["pause", "--group", &group, "--stop-running"]);
    assert_eq!(p.code, 0, "{p:?}");
    crate::harness::wait_until("the task stopped there", || {
        (state() == Some('T')).then_some(())
    });
    std::fs::write(&go, "").unwrap();
    let c = h.sp(["resume", "--group", &group]);
    assert_eq!(c.code, 0, "{c:?}");
    let w = h.sp(["wait", "--group", &group, "--json"]);
    assert_eq!(w.code, 0, "{w:?}");
    assert_eq!(h.env.result("hs-1")["stops"], 1);
}
