//! The TCP side of the two-process tools (pingpong, perf): resolving the
//! server's name, connecting while it starts, and a server that serves the
//! first client whose opening message is sound.
//!
//! The contract, as rdma-core's and perftest's servers: a server runs one
//! test with one client and exits. Unlike them, a client that connects and
//! then says nothing for [`OPENING_TIMEOUT`], or whose opening message is
//! malformed, is refused with a message on standard error and the server
//! waits for the next client, so a stray connection (a port scan, a
//! `telnet`, another tool) cannot hold it forever.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::error::Error;

/// How long a server waits for an accepted client's opening message (our
/// clients send it at once) and each later message of the setup.
pub(crate) const OPENING_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a client waits for each answer of the setup: more than a
/// server can spend refusing a silent client before reaching ours.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a client keeps trying to connect while the server starts.
pub(crate) const CONNECT_WAIT: Duration = Duration::from_secs(10);

/// The address of `server` at TCP `port`. `server` is a host name or an
/// address without a port: `host:port` is refused with the way to say it.
pub(crate) fn resolve(server: &str, port: u16) -> Result<SocketAddr, Error> {
    if let Some((host, p)) = host_and_port(server) {
        return Err(Error::Usage(format!(
            "SERVER {server:?} has a port: give the host alone and the port with -p \
             (`-p {p} {host}`)"
        )));
    }
    let name = server.trim_start_matches('[').trim_end_matches(']');
    (name, port)
        .to_socket_addrs()
        .map_err(|e| Error::Usage(format!("cannot resolve the server {server:?}: {e}")))?
        .next()
        .ok_or_else(|| Error::Usage(format!("the server {server:?} has no address")))
}

/// `host:port` or `[v6]:port` split, if `s` has that form; a bare IPv6
/// address (several colons, no brackets) is not.
fn host_and_port(s: &str) -> Option<(&str, u16)> {
    if s.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    let (host, port) = s.rsplit_once(':')?;
    let port = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty() && !host.contains(':') || host.parse::<std::net::Ipv6Addr>().is_ok())
        .then_some((host, port))
}

/// Connects to `server`, trying for [`CONNECT_WAIT`] while it is not yet
/// listening (so that a client started together with its server works).
/// The stream has [`ANSWER_TIMEOUT`] on reads and writes.
pub(crate) fn connect_retry(server: &str, port: u16) -> Result<TcpStream, Error> {
    let addr = resolve(server, port)?;
    let start = Instant::now();
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(s) => {
                s.set_read_timeout(Some(ANSWER_TIMEOUT))?;
                s.set_write_timeout(Some(ANSWER_TIMEOUT))?;
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) if start.elapsed() >= CONNECT_WAIT => {
                return Err(Error::Connect {
                    addr,
                    secs: CONNECT_WAIT.as_secs(),
                    source: e,
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Binds a TCP listener, naming the address on failure.
pub(crate) fn listen(addr: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(addr).map_err(|source| Error::Listen { addr, source })
}

/// Accepts clients until `opening` accepts one: `opening` reads (and may
/// answer) the client's first messages under [`OPENING_TIMEOUT`]. A client
/// it refuses with [`Error::Refused`] is told nothing more, named on
/// standard error, and dropped; any other error ends the server. Returns the
/// stream (with [`ANSWER_TIMEOUT`] for the rest of the setup;
/// [`clear_timeouts`] before the traffic) and what `opening` returned.
pub(crate) fn serve_first<T>(
    listener: &TcpListener,
    mut opening: impl FnMut(&mut TcpStream) -> Result<T, Error>,
) -> Result<(TcpStream, T), Error> {
    loop {
        let (mut s, from) = listener.accept()?;
        s.set_read_timeout(Some(OPENING_TIMEOUT))?;
        s.set_write_timeout(Some(OPENING_TIMEOUT))?;
        let _ = s.set_nodelay(true);
        match opening(&mut s) {
            Ok(v) => {
                // The client is ours: the rest of the setup may wait on
                // its device (thousands of QPs take a while to open).
                s.set_read_timeout(Some(ANSWER_TIMEOUT))?;
                s.set_write_timeout(Some(ANSWER_TIMEOUT))?;
                return Ok((s, v));
            }
            Err(Error::Refused(why)) => {
                eprintln!("ferroce: refused the client at {from}: {why}; waiting for another");
            }
            Err(e) => return Err(e),
        }
    }
}

/// `host:port` of the peer of `s`, for messages.
pub(crate) fn peer_name(s: &TcpStream) -> String {
    s.peer_addr()
        .map_or_else(|_| "the peer".into(), |a| a.to_string())
}

/// No timeouts: the traffic that follows the setup may take any time.
pub(crate) fn clear_timeouts(s: &TcpStream) -> Result<(), Error> {
    s.set_read_timeout(None)?;
    s.set_write_timeout(None)?;
    Ok(())
}

/// A read or write that failed on a timeout says so in words.
pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_is_refused_with_the_way_to_say_it() {
        for (s, host, port) in [
            ("127.0.0.1:18515", "127.0.0.1", 18515),
            ("example:7", "example", 7),
            ("[::1]:9", "::1", 9),
        ] {
            assert_eq!(host_and_port(s), Some((host, port)), "{s}");
            let e = resolve(s, 18515).unwrap_err().to_string();
            assert!(e.contains(&format!("-p {port} {host}")), "{e}");
        }
        for s in ["127.0.0.1", "::1", "fd00::1:2", "localhost", "[::1]"] {
            assert_eq!(host_and_port(s), None, "{s}");
        }
        assert_eq!(resolve("[::1]", 5).unwrap().port(), 5);
    }
}
