//! Copying bytes both ways between two connected sockets, with half-close: the relay's
//! TCP ↔ Unix connections and the proxy's `CONNECT` tunnels.
//!
//! ```text
//!   a ──read──► [8 KiB] ──write──► b     (this thread)
//!   a ◄─write── [8 KiB] ◄──read─── b     (a small scoped thread)
//!   EOF on one side  → shutdown(Write) on the other: the peer sees the half-close
//!   a failed write   → shutdown(Read) on the source: nothing more can be delivered
//! ```
//!
//! Common pitfalls:
//! * Closing (or `shutdown(Both)`) on the first EOF cuts off the other direction: a client
//!   that half-closes after its request would lose the answer.
//! * A read error is the end of that direction, not of the other: a peer that resets after
//!   writing its last bytes must still see them flushed and a FIN, not a reset.
//! * Writes go through std's sockets, which send with `MSG_NOSIGNAL`: a peer that went away
//!   is an `EPIPE`, never a SIGPIPE that would kill the worker or the relay.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;

/// Stack of the thread that copies one direction: an 8 KiB buffer and a few frames.
pub(crate) const PIPE_STACK: usize = 64 * 1024;

/// The size of the buffer each direction copies through.
const CHUNK: usize = 8 * 1024;

/// A connected stream socket that both directions of a pipe can use at once.
pub(crate) trait Duplex: Sync {
    fn read_some(&self, buf: &mut [u8]) -> io::Result<usize>;
    fn write_all_to(&self, buf: &[u8]) -> io::Result<()>;
    fn shut(&self, how: Shutdown);
}

macro_rules! duplex {
    ($t:ty) => {
        impl Duplex for $t {
            fn read_some(&self, buf: &mut [u8]) -> io::Result<usize> {
                (&*self).read(buf)
            }
            fn write_all_to(&self, buf: &[u8]) -> io::Result<()> {
                (&*self).write_all(buf)
            }
            fn shut(&self, how: Shutdown) {
                // ENOTCONN once the peer is gone is expected and harmless.
                let _ = self.shutdown(how);
            }
        }
    };
}
duplex!(TcpStream);
duplex!(UnixStream);

/// Copies `a → b` and `b → a` until both directions have ended. Returns the bytes copied
/// each way. Closing the sockets is the caller's (they are borrowed).
pub(crate) fn pipe<A: Duplex, B: Duplex>(a: &A, b: &B) -> io::Result<(u64, u64)> {
    std::thread::scope(|s| {
        let back = std::thread::Builder::new()
            .name("subpane-pipe".into())
            .stack_size(PIPE_STACK)
            .spawn_scoped(s, || one_way(b, a));
        let back = match back {
            Ok(t) => t,
            Err(e) => {
                a.shut(Shutdown::Both);
                b.shut(Shutdown::Both);
                return Err(e);
            }
        };
        let there = one_way(a, b);
        // A panic in the other direction cannot happen (no unwrap, no indexing past a
        // read's count); count it as nothing copied rather than propagating it.
        let back = back.join().unwrap_or(0);
        Ok((there, back))
    })
}

/// Copies `from → to` until `from` ends, then half-closes `to`.
fn one_way(from: &impl Duplex, to: &impl Duplex) -> u64 {
    let mut buf = [0u8; CHUNK];
    let mut total = 0u64;
    loop {
        match from.read_some(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all_to(&buf[..n]).is_err() {
                    from.shut(Shutdown::Read);
                    break;
                }
                total += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    to.shut(Shutdown::Write);
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_flow_both_ways_and_half_close_reaches_each_peer() {
        let (client, a) = UnixStream::pair().unwrap();
        let (b, server) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || pipe(&a, &b).unwrap());
        (&client).write_all(b"request").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        (&server).read_to_end(&mut got).unwrap();
        assert_eq!(
            got, b"request",
            "the server sees the client's half-close as EOF"
        );
        // The other direction still works after the half-close.
        (&server).write_all(b"answer").unwrap();
        drop(server);
        let mut back = Vec::new();
        (&client).read_to_end(&mut back).unwrap();
        assert_eq!(back, b"answer");
        assert_eq!(t.join().unwrap(), (7, 6));
    }

    #[test]
    fn a_vanished_peer_ends_the_pipe() {
        let (client, a) = UnixStream::pair().unwrap();
        let (b, server) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || pipe(&a, &b).unwrap());
        drop(server);
        // Writing into a pipe whose far end is gone must not block or kill the process.
        let _ = (&client).write_all(&[0u8; 64 * 1024]);
        let mut rest = Vec::new();
        let _ = (&client).read_to_end(&mut rest);
        t.join().unwrap();
    }
}
