//! The network: nothing outside under `none`, the host under `full`.

use super::*;

/// A non-loopback IPv4 address of this machine, to aim at from inside.
fn host_address() -> std::net::Ipv4Addr {
    let mut found = None;
    let mut addrs: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we walk and free.
    unsafe {
        assert_eq!(libc::getifaddrs(&mut addrs), 0);
        let mut a = addrs;
        while !a.is_null() {
            let i = &*a;
            let up = i.ifa_flags & libc::IFF_UP as u32 != 0;
            let lo = i.ifa_flags & libc::IFF_LOOPBACK as u32 != 0;
            if up && !lo && !i.ifa_addr.is_null() && (*i.ifa_addr).sa_family as i32 == libc::AF_INET
            {
                let sin = &*(i.ifa_addr as *const libc::sockaddr_in);
                found = Some(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
                break;
            }
            a = i.ifa_next;
        }
        libc::freeifaddrs(addrs);
    }
    found.expect("this test needs a network interface other than lo")
}

#[test]
fn sandbox_network_none_reaches_nothing_outside() {
    require_tool("perl", &["-e", "1"], "perl");
    let s = Sbx::new();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let tcp6 = TcpListener::bind("[::1]:0").expect("this test needs IPv6 on lo");
    let tcp6_port = tcp6.local_addr().unwrap().port();
    let host = host_address();
    let raw = format!(
        r#"perl -MSocket -e 'socket(S, PF_INET, SOCK_RAW, 1) or die "socket: $!\n"; $r = send(S, "\x08\0\xf7\xff\0\0\0\0", 0, sockaddr_in(0, inet_aton("{host}"))); print defined $r ? "raw=sent\n" : "raw=$!\n"'"#
    );
    let script = format!(
        r#"(exec 5<>/dev/tcp/127.0.0.1/{tcp_port}) 2>/dev/null && echo tcp=connected || echo tcp=refused
        (exec 5<>/dev/tcp/::1/{tcp6_port}) 2>/dev/null && echo tcp6=connected || echo tcp6=refused
        echo inside > /dev/udp/127.0.0.1/{udp_port}
        {raw}
        getent hosts example.com > /dev/null; echo "dns=$?"
        tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"#
    );
    let r = s.bash(&s.base(), &script);
    assert_eq!(
        lines(&r.stdout),
        [
            "tcp=refused",
            "tcp6=refused",
            "raw=Network is unreachable",
            "dns=2",
            "lo"
        ],
        "{r:#?}"
    );
    // Nothing arrived: no connection is queued on either listener, and the first datagram
    // the UDP socket gets is the control's, sent after the sandboxed one.
    assert!(
        tcp.accept()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock)
    );
    tcp6.set_nonblocking(true).unwrap();
    assert!(
        tcp6.accept()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock)
    );

    // Control: the same script unsandboxed reaches all of them.
    let c = unsandboxed(&script.replace("inside", "outside"));
    let c_lines = lines(&c.stdout);
    assert_eq!(
        c_lines[..3],
        ["tcp=connected", "tcp6=connected", "raw=sent"],
        "{c:#?}"
    );
    udp.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut buf = [0u8; 64];
    let n = udp.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"outside\n");
}

#[test]
fn sandbox_network_full_reaches_the_host() {
    let s = Sbx::new();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let mut policy = s.base();
    policy["network"] = json!("full");
    let r = s.bash(
        &policy,
        &format!("exec 5<>/dev/tcp/127.0.0.1/{port} && echo hello >&5"),
    );
    assert_eq!(r.code, 0, "{r:#?}");
    let (mut conn, _) = tcp.accept().unwrap();
    let mut got = String::new();
    conn.read_to_string(&mut got).unwrap();
    assert_eq!(got, "hello\n");
    assert_eq!(r.enforced()["namespaces"], json!(["user", "mount", "pid"]));
}

/// The relay to the egress proxy serves the program and ends with it: a relay left behind
/// would hold a network namespace and a descriptor of the attempt.
#[test]
fn sandbox_relay_ends_with_the_program() {
    let s = Sbx::new();
    let mut policy = s.base();
    policy["network"] = json!({"allow": ["127.0.0.1"]});
    let socket = s.attempt.join("proxy.sock");
    let mut argv = s.helper_argv(&policy, &["true".as_ref()]);
    let at = argv.iter().position(|a| a == "--").unwrap();
    argv.insert(at, socket.clone().into());
    argv.insert(at, "--proxy-socket".into());
    let r = s.run(argv, None);
    assert_eq!(r.code, 0, "{r:#?}");
    // A relay is this socket's only user: it names it on its command line (the helper's).
    let needle = socket.display().to_string();
    let relays = || -> Vec<i32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let zombie = stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'));
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                !zombie && String::from_utf8_lossy(&cmd).contains(&needle)
            })
            .collect()
    };
    crate::harness::wait_until("the relay to end with the program", || {
        relays().is_empty().then_some(())
    });
}
