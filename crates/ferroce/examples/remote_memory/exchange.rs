//! How the client reaches the server's TCP port. What travels on it is
//! the library's: [`ferroce::QpEndpoint::exchange`] trades the two QP
//! endpoints, then [`ferroce::RemoteRegion::send`] and
//! [`ferroce::RemoteRegion::recv`] carry the server's region; each
//! encoding has a fixed length and is checked as it is decoded (kind,
//! version, ranges), so nothing here frames or checks it.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::Res;

/// Connects to the server, which may still be starting.
pub(crate) fn connect_retrying(server: SocketAddr) -> Res<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect(server) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() > deadline => {
                return Err(format!("cannot reach the server at {server}: {e}").into());
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
