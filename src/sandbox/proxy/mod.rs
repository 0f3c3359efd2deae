//! The egress proxy outside the sandbox (`--network allow:…`). (Stub: the interface the
//! worker calls.)

pub mod decide;
pub mod log;

use std::path::Path;

use crate::spec::HostPattern;

/// A running proxy; dropping it stops accepting and removes its socket.
#[derive(Debug)]
pub struct ProxyHandle {
    _private: (),
}

/// Starts the proxy on the Unix socket `socket` (threads of the calling process). It lets
/// through only hosts that `allow` matches and appends every decision to `log`
/// (`network.jsonl`).
pub fn start(socket: &Path, allow: Vec<HostPattern>, log: &Path) -> std::io::Result<ProxyHandle> {
    let _ = (socket, allow, log);
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}
