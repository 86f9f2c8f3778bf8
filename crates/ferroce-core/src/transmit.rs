//! What the engine gives the I/O layer to send ([`Transmit`]), and the pool
//! of packet buffers it builds them in.

use ferroce_wire::TransportRepr;

use crate::verbs::Path;

/// A packet to send: the transport (BTH through ICRC, the ICRC bytes left
/// zero for the I/O layer, which knows the IP header it covers) and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    pub path: Path,
    pub data: Vec<u8>,
}

impl Transmit {
    /// Emits `t` into a buffer from `pool`; `fill` writes the payload in
    /// place (`t.payload_len` bytes).
    pub(crate) fn build(
        pool: &mut BufPool,
        path: Path,
        t: &TransportRepr,
        fill: impl FnOnce(&mut [u8]),
    ) -> Self {
        let mut data = pool.take(t.buffer_len());
        // The engine builds reprs from its own valid state; a refusal here
        // would be a bug, and yields an empty packet the peer drops.
        match t.emit_headers(&mut data) {
            Ok(at) => fill(&mut data[at]),
            Err(_) => data.clear(),
        }
        Self { path, data }
    }
}

/// Packet buffers given back after sending ([`Endpoint::recycle`]), so that
/// building a packet does not allocate (and fault in fresh pages) each time.
#[derive(Debug, Default)]
pub(crate) struct BufPool(Vec<Vec<u8>>);

impl BufPool {
    /// Keeps at most this many spare buffers.
    const MAX: usize = 256;

    /// A buffer of `len` bytes; their contents are whatever they were.
    pub(crate) fn take(&mut self, len: usize) -> Vec<u8> {
        match self.0.pop() {
            Some(mut b) => {
                b.resize(len, 0);
                b
            }
            None => vec![0; len],
        }
    }

    pub(crate) fn give(&mut self, buf: Vec<u8>) {
        if self.0.len() < Self::MAX && buf.capacity() >= 64 {
            self.0.push(buf);
        }
    }
}
