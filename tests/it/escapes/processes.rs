//! Sockets and processes: the caller's tmux server and other sockets that act for whoever
//! connects, and other processes' command lines.

use std::os::unix::net::UnixListener;
use std::process::{Child, Command, Stdio};

use super::*;
use crate::trust::OtherServer;

/// A Unix socket outside `/tmp` that answers `hello` to whoever connects; its thread ends
/// with the test.
fn listening(at: &Path) -> UnixListener {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    let l = UnixListener::bind(at).unwrap();
    let c = l.try_clone().unwrap();
    std::thread::spawn(move || {
        for s in c.incoming() {
            let Ok(mut s) = s else { return };
            let _ = std::io::Write::write_all(&mut s, b"hello");
        }
    });
    l
}

/// Python: connect to each path given and say what happened.
const CONNECT: &str = r#"
import socket, sys
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(p)
        print("REACHED", p, s.recv(5).decode())
    except OSError as e:
        print("refused", p, e.errno)
"#;

#[test]
fn sockets_that_act_outside_are_hidden_from_a_sandboxed_program() {
    crate::harness::require_tool("python3", &["--version"], "python3");
    crate::harness::require_tool("tmux", &["-V"], "tmux");
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-sock-");
    // The user's own tmux server (its socket outside /tmp, named by $TMUX), and sockets
    // named by $SSH_AUTH_SOCK, in $XDG_RUNTIME_DIR and in /run.
    let tmux_sock = o.join("tmux-user/default");
    std::fs::create_dir_all(tmux_sock.parent().unwrap()).unwrap();
    let user_tmux = OtherServer::start(tmux_sock.clone());
    let agent = o.join("ssh/agent.sock");
    let runtime = o.join("runtime");
    let bus = runtime.join("bus");
    let run = PathBuf::from(format!(
        "/run/subpane-escape-test-{}.sock",
        std::process::id()
    ));
    let _listeners = [&agent, &bus, &run].map(|p| listening(p));
    let marker = o.join("WINDOW_OPENED");
    let script = format!(
        "tmux -S {t} new-window -d 'touch {m}' 2>/dev/null && echo TMUX_REACHED; \
         python3 -c {c} {a} {b} {r}",
        t = q(&tmux_sock),
        m = q(&marker),
        c = shell_quote(CONNECT),
        a = q(&agent),
        b = q(&bus),
        r = q(&run),
    );
    let vars = [
        ("TMUX", format!("{},1,0", tmux_sock.display())),
        ("SSH_AUTH_SOCK", agent.display().to_string()),
        ("XDG_RUNTIME_DIR", runtime.display().to_string()),
    ];
    let sandboxed: Ran = env
        .cmd()
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .args(["run", "--json", "--run-id", "sock", "--sandbox", "--"])
        .args(["bash", "-c", &script])
        .output()
        .unwrap()
        .into();
    let _ = std::fs::remove_file(&run);
    assert_eq!(sandboxed.code, 0, "{sandboxed:?}");
    let out = stdout_log(&env, "sock", 1);
    assert!(
        !marker.exists(),
        "the user's tmux server opened a window: {out}"
    );
    assert!(!out.contains("REACHED"), "{out}");
    assert_eq!(out.matches("refused").count(), 3, "{out}");
    assert!(user_tmux.has_victim());

    // Control: the same script without the sandbox reaches all of them.
    let _again = listening(&run);
    let c = Command::new("bash")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&run);
    let c = String::from_utf8_lossy(&c.stdout).into_owned();
    assert!(c.contains("TMUX_REACHED"), "{c}");
    assert_eq!(c.matches("REACHED").count(), 4, "{c}");
    env.assert_no_leftovers();
}

/// A process outside the sandbox with a token in its command line (as an agent's argv may
/// hold one), killed with its group on drop.
struct Holder(Child);

impl Holder {
    fn start(token: &str) -> Self {
        use std::os::unix::process::CommandExt;
        let child = Command::new("sh")
            .args(["-c", "sleep 600; : \"$0\"", token])
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        Holder(child)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the group this test made.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

#[test]
fn a_sandboxed_program_sees_only_its_own_processes() {
    let env = TestEnv::with_home_outside_tmp();
    let token = format!("sk-token-{}", std::process::id());
    let holder = Holder::start(&token);
    let pid = holder.0.id();
    // The token is put together at run time, so the script's own command line lacks it.
    let (head, tail) = token.split_at(5);
    let script = format!(
        "t={head}; t=\"$t\"{tail}; grep -qs \"$t\" /proc/[0-9]*/cmdline && echo SAW_TOKEN; \
         cat /proc/{pid}/cmdline 2>/dev/null && echo SAW_PID; \
         echo \"self=$$\"; ls /proc | grep -c '^[0-9]' | sed 's/^/procs=/'",
    );
    let r = run_bash(&env, "pids", &["--sandbox"], &script);
    assert_eq!(r.code, 0, "{r:?}");
    let out = stdout_log(&env, "pids", 1);
    assert!(!out.contains("SAW_"), "{out}");
    // pid 1 is the sandbox's own init, the program the next one.
    assert!(out.contains("self=2\n"), "{out}");
    let procs: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("procs="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX);
    assert!(procs <= 5, "{out}");
    let v = env.result("pids");
    let ns = &v["sandbox"]["enforced"]["namespaces"];
    assert!(ns.as_array().unwrap().iter().any(|n| n == "pid"), "{ns}");

    // Control: outside, the token is in plain sight.
    let c = Command::new("bash").args(["-c", &script]).output().unwrap();
    assert!(String::from_utf8_lossy(&c.stdout).contains("SAW_TOKEN"));
    env.assert_no_leftovers();
}
