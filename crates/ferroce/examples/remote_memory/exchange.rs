//! What the two sides tell each other over TCP before any RDMA: the
//! library's own encodings ([`ferroce::QpEndpoint::to_bytes`],
//! [`ferroce::RemoteRegion::to_bytes`]), each behind a one-byte length so
//! that the reader need not know an encoding's size. The decoders check
//! what arrives (kind, version, length, ranges), so nothing here does.
//!
//! The client sends its endpoint; the server answers with its endpoint,
//! then its region.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::Res;

/// Sends one encoding.
pub(crate) fn send(tcp: &mut TcpStream, bytes: &[u8]) -> Res<()> {
    let len = u8::try_from(bytes.len()).map_err(|_| "an encoding longer than 255 bytes")?;
    tcp.write_all(&[len])?;
    tcp.write_all(bytes)?;
    Ok(())
}

/// Receives one encoding, for `QpEndpoint::from_bytes` or
/// `RemoteRegion::from_bytes`.
pub(crate) fn recv(tcp: &mut TcpStream) -> Res<Vec<u8>> {
    let mut len = [0u8];
    tcp.read_exact(&mut len)?;
    let mut bytes = vec![0u8; len[0].into()];
    tcp.read_exact(&mut bytes)?;
    Ok(bytes)
}

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
