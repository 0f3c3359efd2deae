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
    // Runs there are not done yet: refused, nothing made.
    let run = sp(&env, &cluster, &["run", "--host", "hpc", "--", "true"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("Slurm host is not supported yet"),
        "{run:?}"
    );
    assert!(
        !env.home.join("runs").exists()
            || std::fs::read_dir(env.home.join("runs"))
                .unwrap()
                .next()
                .is_none()
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
