//! Trading the out-of-band encodings ([`QpEndpoint::to_bytes`],
//! [`RemoteRegion::to_bytes`]) over any byte stream: each side writes
//! its own, then reads the peer's, which has a fixed length
//! ([`QpEndpoint::ENCODED_LEN`], [`RemoteRegion::ENCODED_LEN`]), so no
//! framing is needed. Both sides may write first at once: an encoding is
//! a few dozen bytes, which a socket's buffer takes without blocking.
//!
//! A peer that stops before a whole encoding fails with
//! [`io::ErrorKind::UnexpectedEof`] saying how many bytes came; bytes that
//! do not decode fail with [`io::ErrorKind::InvalidData`] carrying the
//! [`DecodeError`](crate::DecodeError) that says why.

use std::io::{self, Read, Write};

use crate::{QpEndpoint, RemoteRegion};

impl QpEndpoint {
    /// Writes this endpoint's encoding to `stream` and reads the peer's
    /// from it: the peer calls the same with its own endpoint.
    ///
    /// ```no_run
    /// # fn f(qp: &ferroce::QueuePair) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut tcp = std::net::TcpStream::connect("192.0.2.1:18515")?;
    /// let peer = qp.endpoint().exchange(&mut tcp)?;
    /// qp.connect(&peer, &ferroce::ConnectOptions::default())?;
    /// # Ok(()) }
    /// ```
    pub fn exchange(&self, stream: &mut (impl Read + Write)) -> io::Result<Self> {
        let theirs = trade(stream, &self.to_bytes(), "QP endpoint")?;
        Self::from_bytes(&theirs).map_err(|e| garbled("QP endpoint", e))
    }
}

impl RemoteRegion {
    /// Writes this region's encoding to `stream` and reads the peer's
    /// from it, as [`QpEndpoint::exchange`]. A side that only serves its
    /// memory sends with [`RemoteRegion::send`] instead, and the other
    /// reads with [`RemoteRegion::recv`].
    pub fn exchange(&self, stream: &mut (impl Read + Write)) -> io::Result<Self> {
        let theirs = trade(stream, &self.to_bytes(), "remote region")?;
        Self::from_bytes(&theirs).map_err(|e| garbled("remote region", e))
    }

    /// Writes this region's encoding to `stream` (for the peer's
    /// [`RemoteRegion::recv`]).
    pub fn send(&self, stream: &mut impl Write) -> io::Result<()> {
        stream.write_all(&self.to_bytes())?;
        stream.flush()
    }

    /// Reads a region the peer wrote with [`RemoteRegion::send`].
    pub fn recv(stream: &mut impl Read) -> io::Result<Self> {
        let mut theirs = [0; Self::ENCODED_LEN];
        read_whole(stream, &mut theirs, "remote region")?;
        Self::from_bytes(&theirs).map_err(|e| garbled("remote region", e))
    }
}

/// Writes `ours`, then reads as many bytes from the peer.
fn trade<const N: usize>(
    stream: &mut (impl Read + Write),
    ours: &[u8; N],
    what: &str,
) -> io::Result<[u8; N]> {
    stream.write_all(ours)?;
    stream.flush()?;
    let mut theirs = [0; N];
    read_whole(stream, &mut theirs, what)?;
    Ok(theirs)
}

/// `read_exact`, with an error that says what was cut short and where.
fn read_whole(stream: &mut impl Read, buf: &mut [u8], what: &str) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match stream.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the peer's {what} was cut short: {got} of {} bytes came before \
                         the stream ended (is the peer running the same ferroce version, \
                         and still alive?)",
                        buf.len()
                    ),
                ));
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn garbled(what: &str, e: crate::DecodeError) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the peer sent no valid {what}: {e}"),
    )
}
