//! The relay inside the sandbox's network namespace: TCP on loopback → the egress proxy's
//! Unix socket outside. (Stub: the interface the sandbox helper calls.)

use std::path::Path;

/// Starts the relay in a child process of the caller: listens on `127.0.0.1:port` in the
/// caller's (new) network namespace and forwards each connection to the Unix socket
/// `target`. Returns once the listener is bound, so the program can connect at once. The
/// relay dies with the caller's program (parent-death signal).
pub fn start(port: u16, target: &Path) -> std::io::Result<()> {
    let _ = (port, target);
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}
