//! `relay::start` as the sandbox helper calls it: in a process of its own (forked here, in
//! the place of the helper), which then "execs" — here: waits until it is killed.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;

use subpane::sandbox::seccomp::{Arch, Role, programs};
use subpane::sandbox::{proxy, relay};
use subpane::spec::HostPattern;

use crate::harness::{DEADLINE, pid_alive, wait_until};

/// Kills and reaps the stand-in for the helper, also when the test fails.
struct Helper(libc::pid_t);

impl Drop for Helper {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.0, libc::SIGKILL);
            libc::waitpid(self.0, std::ptr::null_mut(), 0);
        }
    }
}

/// Forks a process that starts the relay and reports the relay's pid (or an error) on a
/// pipe, then waits to be killed, like a program that runs until it exits.
fn fork_helper(port: u16, target: &Path) -> (Helper, Result<libc::pid_t, String>) {
    let filter = relay_filter();
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", std::io::Error::last_os_error()),
        0 => {
            let report = match relay::start(port, target, &filter) {
                // The relay is this thread's only child.
                Ok(()) => std::fs::read_to_string("/proc/thread-self/children")
                    .map(|c| c.trim().to_owned())
                    .unwrap_or_else(|e| format!("ERR {e}")),
                Err(e) => format!("ERR {e}"),
            };
            let mut w = std::fs::File::from(w);
            let _ = w.write_all(format!("{report}\n").as_bytes());
            drop(w);
            loop {
                unsafe { libc::pause() };
            }
        }
        pid => {
            drop(w);
            // One line, not to EOF: a relay that kept the pipe open must fail the fd check
            // below, not hang here.
            let mut text = String::new();
            std::io::BufRead::read_line(
                &mut std::io::BufReader::new(std::fs::File::from(r)),
                &mut text,
            )
            .unwrap();
            let text = text.trim();
            let relay = text
                .parse::<libc::pid_t>()
                .map_err(|_| format!("the helper reported {text:?}"));
            (Helper(pid), relay)
        }
    }
}

/// The relay's own seccomp filter, as the sandbox builds it.
fn relay_filter() -> Vec<seccompiler::BpfProgram> {
    programs(Arch::host().unwrap(), Role::Relay).unwrap()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_relay_child_keeps_only_its_listener_and_dies_with_the_program() {
    // The whole chain: TCP → relay child → Unix socket → proxy → origin.
    let origin = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin_port = origin.local_addr().unwrap().port();
    let origin_thread = std::thread::spawn(move || {
        let (mut c, _) = origin.accept().unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && c.read(&mut b).unwrap() == 1 {
            head.push(b[0]);
        }
        c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .unwrap();
    });
    // A socket path past the 107-byte address limit, as a 128-byte run id gives.
    let dir = tempfile::tempdir().unwrap();
    let attempt = dir.path().join("r".repeat(128)).join("attempts").join("1");
    std::fs::create_dir_all(&attempt).unwrap();
    let sock = attempt.join("proxy.sock");
    let allow = vec![HostPattern::parse("127.0.0.1").unwrap()];
    let _proxy = proxy::start(
        &sock,
        allow,
        &attempt.join("network.jsonl"),
        Default::default(),
    )
    .unwrap();

    let port = free_port();
    let (helper, relay) = fork_helper(port, &sock);
    let relay = relay.unwrap();

    // Bound when start returned: connect at once, no retry.
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(DEADLINE)).unwrap();
    write!(c, "GET http://127.0.0.1:{origin_port}/ HTTP/1.1\r\n\r\n").unwrap();
    let mut answer = String::new();
    c.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nok"), "{answer}");
    drop(c);
    origin_thread.join().unwrap();

    // Only the listener and /dev/null: not the helper's stdout, stderr or report pipe.
    wait_until("the relay's connection to close", || {
        let fds: Vec<(String, String)> = std::fs::read_dir(format!("/proc/{relay}/fd"))
            .unwrap()
            // An fd closed between the listing and the link read is simply gone.
            .filter_map(|e| {
                let e = e.ok()?;
                let target = std::fs::read_link(e.path()).ok()?;
                Some((
                    e.file_name().to_string_lossy().into_owned(),
                    target.to_string_lossy().into_owned(),
                ))
            })
            .collect();
        (fds.len() == 4).then_some(fds)
    })
    .into_iter()
    .for_each(|(fd, target)| match fd.as_str() {
        "0" | "1" | "2" => assert_eq!(target, "/dev/null"),
        "3" => assert!(target.starts_with("socket:"), "{target}"),
        other => panic!("the relay keeps fd {other} ({target})"),
    });
    let status = std::fs::read_to_string(format!("/proc/{relay}/status")).unwrap();
    assert!(status.contains("Name:\tsubpane-relay"), "{status}");
    assert!(status.contains(&format!("PPid:\t{}", helper.0)), "{status}");
    // It runs under its own filter (the stand-in for the helper has none).
    assert!(status.contains("Seccomp:\t2"), "{status}");

    drop(helper);
    wait_until("the relay to die with its program", || {
        (!pid_alive(relay)).then_some(())
    });
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn a_port_that_cannot_be_bound_is_an_error_for_the_caller() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let e = relay::start(port, Path::new("/nonexistent/proxy.sock"), &relay_filter()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
}
