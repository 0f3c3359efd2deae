//! The mock model server (`tests/mock_model/server.py`) of one test, and where the pinned
//! agent CLIs are: shared by the tests that run real agent CLIs (`agents`, `mcp_parents`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::harness::{TestEnv, require_tool, wait_until};

/// `<repo>/.agent-clis/node_modules/.bin`, failing the test when the CLIs are not installed.
pub(crate) fn clis_bin() -> PathBuf {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join(".agent-clis/node_modules/.bin");
    for cli in ["pi", "claude", "codex"] {
        assert!(
            bin.join(cli).exists(),
            "the agent CLIs are not installed ({} is missing): run scripts/install-agent-clis \
             (scripts/test does it for CI)",
            bin.join(cli).display()
        );
    }
    bin
}

/// A mock model server of this test, killed on drop.
pub(crate) struct Mock {
    child: Child,
    /// The server's request log (`--log`).
    pub(crate) log: PathBuf,
    /// Where the server saves request bodies (`--dump-dir`).
    pub(crate) dumps: PathBuf,
    /// The environment that points the CLIs at this server (from agent_env.py).
    pub(crate) env: BTreeMap<String, String>,
}

impl Mock {
    pub(crate) fn start(env: &TestEnv) -> Mock {
        require_tool("python3", &["--version"], "python3");
        let dir = env.root.path().join("mock");
        let dumps = dir.join("requests");
        std::fs::create_dir_all(&dumps).unwrap();
        let port_file = dir.join("port");
        let log = dir.join("requests.log");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mock_model");
        let child = Command::new("python3")
            .arg(script.join("server.py"))
            .arg("--port-file")
            .arg(&port_file)
            .arg("--log")
            .arg(&log)
            .arg("--dump-dir")
            .arg(&dumps)
            .arg("--max-seconds")
            .arg("300")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start python3 tests/mock_model/server.py");
        let mut mock = Mock {
            child,
            log,
            dumps,
            env: BTreeMap::new(),
        };
        let port: u16 = wait_until("the mock model server's port file", || {
            if let Some(st) = mock.child.try_wait().expect("try_wait") {
                panic!("python3 tests/mock_model/server.py exited ({st}) before it wrote its port");
            }
            std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
        });
        let out = Command::new("python3")
            .arg(script.join("agent_env.py"))
            .arg(dir.join("scratch"))
            .arg(port.to_string())
            .args(["--format", "json"])
            .output()
            .expect("run agent_env.py");
        assert!(
            out.status.success(),
            "agent_env.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        mock.env = serde_json::from_slice(&out.stdout).expect("agent_env.py prints a JSON object");
        mock
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Bodies of the model requests so far (`/v1/...` posts), oldest first.
    pub(crate) fn request_bodies(&self) -> Vec<String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dumps)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        files
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect()
    }

    /// A command for `subpane` whose environment points the CLIs at this server, with
    /// `front` (if any) and the pinned CLIs first on PATH.
    pub(crate) fn subpane(&self, env: &TestEnv, front: Option<&Path>) -> Command {
        let mut c = env.cmd();
        self.point(&mut c, front);
        c
    }

    /// Points `c` (a `subpane` command) at this server, as [`Mock::subpane`] does.
    pub(crate) fn point(&self, c: &mut Command, front: Option<&Path>) {
        c.envs(&self.env);
        c.env("PATH", path_with_clis(front));
    }
}

/// PATH with `front` (if any) and the pinned CLIs' directory before this process's PATH.
pub(crate) fn path_with_clis(front: Option<&Path>) -> OsString {
    let mut paths: Vec<PathBuf> = front.into_iter().map(Path::to_path_buf).collect();
    paths.push(clis_bin());
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
