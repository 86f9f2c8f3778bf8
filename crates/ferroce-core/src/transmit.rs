//! What the engine gives the I/O layer to send ([`Transmit`]), and the pool
//! of packet buffers it builds them in.
//!
//! A `Transmit` says what it carries, as quinn-proto's does, so that the
//! driver and the I/O layer never read its bytes to decide how to send it:
//! whether it is a request or a response, and its ECN codepoint. Unlike
//! quinn's, a `Transmit` is always one packet, so it has no segment size:
//! its GSO segment is `data.len()`, and the I/O layer forms trains from
//! runs of equal lengths. A packet that could not be emitted is an
//! [`EmitError`], never an empty buffer.

use ferroce_wire::TransportRepr;

use crate::verbs::Path;

/// A packet to send: the transport (BTH through ICRC, the ICRC bytes left
/// zero for the I/O layer, which knows the IP header it covers), where it
/// goes and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Where it goes: the destination address, UDP source port, traffic
    /// class, hop limit and RoCE version.
    pub path: Path,
    /// A request, or a response (ACK, READ response, ATOMIC ACKNOWLEDGE).
    pub kind: PacketKind,
    /// The ECN codepoint for the IP header: the low 2 bits of the path's
    /// traffic class (IBA's ECN bits of the GRH's traffic class).
    pub ecn: Ecn,
    /// The packet from its BTH through its ICRC (the ICRC's 4 bytes zero).
    pub data: Vec<u8>,
}

/// Whether a packet is a request or a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PacketKind {
    /// A request: SEND, WRITE, READ request, atomic, CNP, MAD.
    Request,
    /// A response: ACK, NAK, READ response, ATOMIC ACKNOWLEDGE.
    Response,
}

/// The ECN field of the IP header (RFC 3168).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ecn {
    /// Not ECN-capable transport (0b00).
    NotEct,
    /// ECN-capable transport, ECT(1) (0b01).
    Ect1,
    /// ECN-capable transport, ECT(0) (0b10).
    Ect0,
    /// Congestion experienced (0b11).
    Ce,
}

impl Ecn {
    /// The codepoint as the low 2 bits of a TOS / traffic class byte.
    pub const fn bits(self) -> u8 {
        match self {
            Self::NotEct => 0b00,
            Self::Ect1 => 0b01,
            Self::Ect0 => 0b10,
            Self::Ce => 0b11,
        }
    }

    /// The codepoint in the low 2 bits of a traffic class (or TOS) byte.
    pub fn from_traffic_class(tc: u8) -> Self {
        match tc & 0b11 {
            0b00 => Self::NotEct,
            0b01 => Self::Ect1,
            0b10 => Self::Ect0,
            _ => Self::Ce,
        }
    }
}

/// The engine could not emit a packet from its own header values (a bug:
/// the engine builds them from its valid state). The packet is counted in
/// [`crate::Stats::tx_emit_errors`] and not sent, as if lost on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmitError(pub ferroce_wire::Error);

/// Why a packet the engine meant to send was not sent. Either way the QP
/// goes on as if it had been lost on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotSent {
    Emit(EmitError),
}

impl Transmit {
    /// The IPv4 TOS / IPv6 traffic class byte to send with: the path's
    /// DSCP (its traffic class's high 6 bits) and [`Transmit::ecn`]. rxe
    /// writes the path's traffic class there whole (`prepare4`/`prepare6`
    /// in rxe_net.c), which this is while the engine leaves the ECN bits
    /// as the path has them.
    pub fn tos(&self) -> u8 {
        (self.path.traffic_class & !0b11) | self.ecn.bits()
    }

    /// Emits `t` into a buffer from `pool`; `fill` writes the payload in
    /// place (`t.payload_len` bytes).
    pub(crate) fn build(
        pool: &mut BufPool,
        path: Path,
        t: &TransportRepr,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<Self, EmitError> {
        let mut data = pool.take(t.buffer_len());
        match t.emit_headers(&mut data) {
            Ok(at) => fill(&mut data[at]),
            Err(e) => {
                pool.give(data);
                return Err(EmitError(e));
            }
        }
        let response = t.bth.opcode.info().is_some_and(|i| i.response);
        Ok(Self {
            path,
            kind: if response {
                PacketKind::Response
            } else {
                PacketKind::Request
            },
            ecn: Ecn::from_traffic_class(path.traffic_class),
            data,
        })
    }
}

/// Packet buffers given back after sending ([`Endpoint::recycle`]), so that
/// building a packet does not allocate (and fault in fresh pages) each time.
///
/// [`Endpoint::recycle`]: crate::Endpoint::recycle
#[derive(Debug, Default)]
pub(crate) struct BufPool(Vec<Vec<u8>>);

impl BufPool {
    /// Keeps at most this many spare buffers.
    const MAX: usize = 256;
    /// The least capacity a new buffer gets, so that the buffers of small
    /// packets (ACKs, 8-byte WRITEs) are kept too: sized to the packet, they
    /// fell under [`Self::MIN_KEPT`] and were allocated and freed for every
    /// packet of a ping-pong.
    const MIN_CAPACITY: usize = 256;
    /// Buffers smaller than this are not kept (a caller's own).
    const MIN_KEPT: usize = 64;

    /// A buffer of `len` bytes; their contents are whatever they were.
    pub(crate) fn take(&mut self, len: usize) -> Vec<u8> {
        let mut b = self
            .0
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(len.max(Self::MIN_CAPACITY)));
        b.resize(len, 0);
        b
    }

    pub(crate) fn give(&mut self, buf: Vec<u8>) {
        if self.0.len() < Self::MAX && buf.capacity() >= Self::MIN_KEPT {
            self.0.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use ferroce_wire::Opcode;

    use super::*;

    fn path(traffic_class: u8) -> Path {
        Path {
            remote: IpAddr::V4(Ipv4Addr::LOCALHOST),
            udp_src_port: 0xc000,
            traffic_class,
            hop_limit: 64,
            roce: crate::verbs::RoceMode::V2,
        }
    }

    #[test]
    fn says_what_it_carries() {
        let mut pool = BufPool::default();
        let repr = |op| ferroce_wire::samples::transport(op, 7, 0);
        let ack = Transmit::build(&mut pool, path(0), &repr(Opcode::RC_ACKNOWLEDGE), |_| {});
        let ack = ack.unwrap();
        assert_eq!((ack.kind, ack.ecn), (PacketKind::Response, Ecn::NotEct));
        let send = Transmit::build(&mut pool, path(0x0a), &repr(Opcode::RC_SEND_ONLY), |_| {});
        let send = send.unwrap();
        assert_eq!((send.kind, send.ecn), (PacketKind::Request, Ecn::Ect0));
        assert_eq!(send.data[0], Opcode::RC_SEND_ONLY.0);
    }

    #[test]
    fn tos_is_the_paths_traffic_class() {
        let mut pool = BufPool::default();
        let repr = ferroce_wire::samples::transport(Opcode::RC_SEND_ONLY, 7, 0);
        for tc in [0x00, 0x02, 0x61, 0x62, 0xb8, 0xff] {
            let t = Transmit::build(&mut pool, path(tc), &repr, |_| {}).unwrap();
            assert_eq!(t.tos(), tc);
            assert_eq!(Ecn::from_traffic_class(tc).bits(), tc & 0b11);
        }
        // A codepoint the engine sets (a congestion mark) replaces the path's.
        let mut t = Transmit::build(&mut pool, path(0x62), &repr, |_| {}).unwrap();
        t.ecn = Ecn::Ce;
        assert_eq!(t.tos(), 0x63);
    }

    #[test]
    fn an_emit_failure_is_an_error_not_an_empty_packet() {
        let mut pool = BufPool::default();
        // A WRITE FIRST without its RETH cannot be emitted.
        let mut t = ferroce_wire::samples::transport(Opcode::RC_RDMA_WRITE_FIRST, 7, 0);
        assert!(Transmit::build(&mut pool, path(0), &t, |_| {}).is_ok());
        t.reth = None;
        let r = Transmit::build(&mut pool, path(0), &t, |_| {});
        assert!(r.is_err(), "{r:?}");
    }
}
