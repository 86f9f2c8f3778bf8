//! UDP header (RFC 768), as RoCE v2 uses it: destination port 4791, the
//! source port an entropy value (0xC000 | flow hash) and, as rxe sends it, a
//! zero checksum over IPv4 and IPv6 alike.

use crate::field::{Field, read_u16, write_u16};
use crate::{Header, Result};

/// The IANA port of RoCE v2.
pub const ROCE_V2_PORT: u16 = 4791;
/// UDP header length.
pub const HEADER_LEN: usize = 8;

pub(crate) mod field {
    use super::Field;
    pub(crate) const SRC_PORT: Field = 0..2;
    pub(crate) const DST_PORT: Field = 2..4;
    /// Header plus payload.
    pub(crate) const LENGTH: Field = 4..6;
    pub(crate) const CHECKSUM: Field = 6..8;
}

/// The content of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    /// Source port; RoCE v2 senders vary it per flow for ECMP entropy.
    pub src_port: u16,
    /// Destination port, 4791 for RoCE v2.
    pub dst_port: u16,
    /// Header plus payload, as the header says.
    pub length: u16,
    /// Checksum; 0 (none) as rxe sends it, the ICRC protecting the packet.
    pub checksum: u16,
}

impl UdpRepr {
    #[inline]
    /// Reads the 8-byte header at the start of `b`; fails only if `b` is shorter.
    /// No field is judged here.
    pub fn parse(b: &[u8]) -> Result<Self> {
        crate::field::check(Header::Udp, HEADER_LEN, b.len())?;
        Ok(Self {
            src_port: read_u16(b, field::SRC_PORT),
            dst_port: read_u16(b, field::DST_PORT),
            length: read_u16(b, field::LENGTH),
            checksum: read_u16(b, field::CHECKSUM),
        })
    }

    /// Writes the 8-byte header as given; fails only if `b` is shorter.
    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        crate::field::check(Header::Udp, HEADER_LEN, b.len())?;
        write_u16(b, field::SRC_PORT, self.src_port);
        write_u16(b, field::DST_PORT, self.dst_port);
        write_u16(b, field::LENGTH, self.length);
        write_u16(b, field::CHECKSUM, self.checksum);
        Ok(())
    }
}

/// The RoCE v2 UDP source port for a flow label, as rxe and RoCE NICs
/// compute it: the 20-bit label folded to 14 bits, in 0xC000..=0xFFFF.
pub const fn source_port_from_flow_label(fl: u32) -> u16 {
    let fl = fl & 0xf_ffff;
    0xc000 | (((fl & 0x3fff) ^ (fl >> 14)) as u16)
}

/// The 20-bit flow label rdma-core and the kernel derive from a connected
/// QP pair: a hash of the product of the two QP numbers.
pub const fn flow_label_from_qpns(lqpn: u32, rqpn: u32) -> u32 {
    let v = (lqpn as u64) * (rqpn as u64);
    ((v ^ (v >> 20) ^ (v >> 40)) & 0xf_ffff) as u32
}

/// The 20-bit flow label rdma_cm gives a connection from the IP ports of
/// its two ends (the client's source port, the service's port), as seen on
/// rxe's rdma_cm-connected QPs: `(source * 31 + destination) & 0xFFFFF`.
pub const fn flow_label_from_ports(source: u16, destination: u16) -> u32 {
    ((source as u32) * 31 + destination as u32) & 0xf_ffff
}

/// The RoCE v2 UDP source port rxe uses for a UD QP (and QP1): 0xC000
/// plus a 14-bit multiplicative hash of the QP number (the kernel's
/// `hash_32(qpn, 14)`).
pub const fn ud_source_port(qpn: u32) -> u16 {
    0xc000 + (qpn.wrapping_mul(0x61c8_8647) >> 18) as u16
}

#[cfg(test)]
mod rdma_cm_port_tests {
    use super::*;

    /// rxe's rdma_cm QPs in the rig (its README): rping's client port
    /// 50292 to 7174 ran on UDP source port 58893, perftest's 37808 to
    /// 18515 on 60075.
    #[test]
    fn ports_give_the_source_ports_rxe_used() {
        assert_eq!(
            source_port_from_flow_label(flow_label_from_ports(50292, 7174)),
            58893
        );
        assert_eq!(
            source_port_from_flow_label(flow_label_from_ports(37808, 18515)),
            60075
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rxe_source_ports() {
        // ../shared/rig/README.md §5: QPN 0x11 <-> 0x11 gives 49441.
        let fl = flow_label_from_qpns(0x11, 0x11);
        assert_eq!(source_port_from_flow_label(fl), 49441);
        // §5: QP1 -> 55410, UD QPN 0x13 -> 53368, 0x16 -> 55758.
        assert_eq!(ud_source_port(1), 55410);
        assert_eq!(ud_source_port(0x13), 53368);
        assert_eq!(ud_source_port(0x16), 55758);
    }
}
