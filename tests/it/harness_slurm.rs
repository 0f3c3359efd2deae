//! A single-node Slurm cluster for a test: munged, slurmctld and slurmd from Debian's
//! packages, every file under the test's temp dir, on loopback and free ports.
//!
//! ```text
//!  SlurmCluster::start(root)
//!    ├─ root/slurm/munge/: a key of its own; munged -F --force (its socket, pid, seed, log)
//!    ├─ root/slurm/slurm.conf: this machine's short hostname as the one node, 127.0.0.1,
//!    │   NoCtldInAddrAny/NoInAddrAny, AuthInfo=socket=… (both munge plugins), linuxproc
//!    ├─ slurmctld -D, slurmd -D (this test's children)
//!    └─ waits until `sinfo` shows the node idle
//!  drop: scancel of every job, then the daemons (and munged) are ended
//! ```
//!
//! Commands reach this cluster through `SLURM_CONF` ([`SlurmCluster::conf`]): give it to
//! every `subpane`, `sinfo` or `srun` the test runs.
//!
//! Common pitfalls:
//! * munged as root under a temp dir needs `-F --force` and its own key, socket, pid, seed
//!   and log files.
//! * `proctrack/linuxproc` does not follow a process that daemonises: a tmux server started
//!   inside a job survives `scancel`; tests end what they start.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::harness::{self, DEADLINE};

/// The partition of the test cluster.
pub const PARTITION: &str = "debug";

pub struct SlurmCluster {
    pub dir: PathBuf,
    /// The cluster's slurm.conf: `SLURM_CONF` for every command that reaches it.
    pub conf: PathBuf,
    /// The one node's name (this machine's short hostname).
    pub node: String,
    daemons: Vec<Child>,
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().unwrap().port()
}

fn sbin(tool: &str) -> PathBuf {
    ["/usr/sbin", "/sbin", "/usr/bin"]
        .iter()
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(tool))
}

/// This machine's short hostname, as slurmd names its node.
fn short_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(r, 0, "gethostname");
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).into_owned();
    name.split('.').next().unwrap_or(&name).to_owned()
}

impl SlurmCluster {
    pub fn start(root: &Path) -> Self {
        let munged = sbin("munged");
        harness::require_tool(munged.to_str().unwrap(), &["--version"], "munge");
        let ctld = sbin("slurmctld");
        harness::require_tool(ctld.to_str().unwrap(), &["-V"], "slurm-wlm");
        // Slurm's clients answer nothing, not even -V, without a cluster's config.
        for client in ["sinfo", "srun", "sbatch", "scancel", "squeue", "scontrol"] {
            harness::require_tool(
                "sh",
                &["-c", &format!("command -v {client}")],
                "slurm-client",
            );
        }
        let dir = root.join("slurm");
        let m = dir.join("munge");
        for d in [&m, &dir.join("ctld"), &dir.join("d"), &dir.join("log")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut key = vec![0u8; 1024];
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .expect("a munge key from /dev/urandom");
        let key_file = m.join("munge.key");
        std::fs::write(&key_file, &key).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let socket = m.join("munge.sock");
        let mut daemons = Vec::new();
        daemons.push(
            Command::new(&munged)
                .args(["-F", "--force"])
                .arg(format!("--key-file={}", key_file.display()))
                .arg(format!("--socket={}", socket.display()))
                .arg(format!("--pid-file={}", m.join("munged.pid").display()))
                .arg(format!("--seed-file={}", m.join("seed").display()))
                .arg(format!("--log-file={}", m.join("log").display()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start munged"),
        );
        harness::wait_until("munged's socket", || socket.exists().then_some(()));
        let node = short_hostname();
        let (p1, p2) = (free_port(), free_port());
        let conf = dir.join("slurm.conf");
        let d = dir.display();
        std::fs::write(
            &conf,
            format!(
                "ClusterName=sptest\nSlurmctldHost={node}(127.0.0.1)\nSlurmctldPort={p1}\n\
                 SlurmdPort={p2}\nAuthType=auth/munge\nCredType=cred/munge\n\
                 AuthInfo=socket={sock}\nCommunicationParameters=NoCtldInAddrAny,NoInAddrAny\n\
                 SlurmUser=root\nSlurmdUser=root\nStateSaveLocation={d}/ctld\n\
                 SlurmdSpoolDir={d}/d\nSlurmctldPidFile={d}/ctld.pid\nSlurmdPidFile={d}/d.pid\n\
                 SlurmctldLogFile={d}/log/ctld.log\nSlurmdLogFile={d}/log/d.log\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
                 SchedulerType=sched/backfill\nSelectType=select/cons_tres\n\
                 SelectTypeParameters=CR_Core\nReturnToService=2\nMpiDefault=none\n\
                 JobAcctGatherType=jobacct_gather/none\n\
                 AccountingStorageType=accounting_storage/none\nKillWait=5\nInactiveLimit=0\n\
                 SlurmctldTimeout=30\nSlurmdTimeout=30\n\
                 NodeName={node} NodeAddr=127.0.0.1 CPUs=2 RealMemory=2000 State=UNKNOWN\n\
                 PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP \
                 OverSubscribe=FORCE:16\n",
                sock = socket.display()
            ),
        )
        .unwrap();
        for (tool, log) in [(&ctld, "ctld.out"), (&sbin("slurmd"), "d.out")] {
            daemons.push(
                Command::new(tool)
                    .arg("-D")
                    .arg("-f")
                    .arg(&conf)
                    .env("SLURM_CONF", &conf)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(std::fs::File::create(dir.join("log").join(log)).unwrap())
                    .spawn()
                    .expect("start a Slurm daemon"),
            );
        }
        let cluster = SlurmCluster {
            dir,
            conf,
            node,
            daemons,
        };
        cluster.wait_idle();
        cluster
    }

    /// Stops the node's slurmd (SIGKILL, as a crashed daemon): the jobs' own processes run
    /// on, and slurmctld finds the node gone only after `SlurmdTimeout`.
    pub fn kill_slurmd(&mut self) {
        let d = self.daemons.last_mut().expect("slurmd");
        let _ = d.kill();
        let _ = d.wait();
    }

    /// `tool` with this cluster's `SLURM_CONF`.
    pub fn cmd(&self, tool: &str) -> Command {
        let mut c = Command::new(tool);
        c.env("SLURM_CONF", &self.conf).stdin(Stdio::null());
        c
    }

    fn wait_idle(&self) {
        let end = Instant::now() + DEADLINE;
        loop {
            let out = self
                .cmd("sinfo")
                .args(["--noheader", "--format=%t"])
                .output()
                .expect("run sinfo");
            let state = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if out.status.success() && state == "idle" {
                return;
            }
            assert!(
                Instant::now() < end,
                "the test cluster's node is not idle (`{state}`): {}",
                std::fs::read_to_string(self.dir.join("log/ctld.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        let _ = self
            .cmd("scancel")
            .args(["--full", "--user=root"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // The daemons last to first: slurmd, slurmctld, munged.
        for c in self.daemons.iter_mut().rev() {
            // SAFETY: plain kill(2) of this test's own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let end = Instant::now() + Duration::from_secs(5);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        // A job step whose slurmd went first (a test that failed half-way, or one that
        // killed it) is nobody's child: found by this cluster's config in its environment.
        let mine = format!("SLURM_CONF={}", self.conf.display());
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else {
                continue;
            };
            let stepd =
                std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c.starts_with(b"slurmstepd"));
            let ours = std::fs::read(e.path().join("environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == mine.as_bytes()));
            if stepd && ours {
                // SAFETY: plain kill(2) of a process this test's cluster started.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}
