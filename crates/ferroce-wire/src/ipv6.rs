//! IPv6 header (RFC 8200) as RoCE v2 carries it, and the GRH of RoCE v1 and
//! InfiniBand (IBA vol. 1 §5.2.4), which has the same 40-byte layout with
//! next header 0x1B. Traffic class, flow label and hop limit are masked out
//! of the ICRC. Extension headers are not followed.

use std::net::Ipv6Addr;

use crate::field::{Field, read_u16, read_u32, write_u16, write_u32};
use crate::{Error, Header, Result};

/// Header length (IPv6 and GRH alike).
pub const HEADER_LEN: usize = 40;
/// IP version 6 (the GRH's IPVer too), in the header's first nibble.
pub const VERSION: u8 = 6;
/// The largest flow label (20 bits).
pub const MAX_FLOW_LABEL: u32 = 0xf_ffff;

pub(crate) mod field {
    use super::Field;
    /// Version (4 bits), traffic class (8), flow label (20).
    pub(crate) const VER_TC_FLOW: Field = 0..4;
    pub(crate) const PAYLOAD_LEN: Field = 4..6;
    pub(crate) const NEXT_HEADER: usize = 6;
    pub(crate) const HOP_LIMIT: usize = 7;
    pub(crate) const SRC: Field = 8..24;
    pub(crate) const DST: Field = 24..40;
}
/// GRH next header: IBA transport (a BTH) follows.
pub const NEXT_HEADER_IBA: u8 = 0x1b;

/// The content of an IPv6 header or a GRH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Repr {
    /// Traffic Class (TClass in a GRH): DSCP in the high six bits, ECN in the low two.
    pub traffic_class: u8,
    /// Flow Label, 20 bits.
    pub flow_label: u32,
    /// Payload Length (PayLen in a GRH): bytes after this 40-byte header.
    pub payload_len: u16,
    /// Next Header (NxtHdr in a GRH): 17 (UDP) for RoCE v2, 0x1B for a GRH.
    pub next_header: u8,
    /// Hop Limit (HopLmt in a GRH).
    pub hop_limit: u8,
    /// Source address (the SGID in a GRH).
    pub src: Ipv6Addr,
    /// Destination address (the DGID in a GRH).
    pub dst: Ipv6Addr,
}

impl Ipv6Repr {
    /// Parses the header at the start of `b`. `header` names it in errors
    /// (`Header::Ipv6` or `Header::Grh`); the version must be 6.
    #[inline]
    pub fn parse_as(header: Header, b: &[u8]) -> Result<Self> {
        crate::field::check(header, HEADER_LEN, b.len())?;
        if b[0] >> 4 != VERSION {
            return Err(Error::BadVersion {
                field: if header == Header::Grh {
                    "grh.ipver"
                } else {
                    "ipv6.version"
                },
                value: b[0] >> 4,
            });
        }
        let w = read_u32(b, field::VER_TC_FLOW);
        let mut src = [0; 16];
        let mut dst = [0; 16];
        src.copy_from_slice(&b[field::SRC]);
        dst.copy_from_slice(&b[field::DST]);
        Ok(Self {
            traffic_class: (w >> 20) as u8,
            flow_label: w & MAX_FLOW_LABEL,
            payload_len: read_u16(b, field::PAYLOAD_LEN),
            next_header: b[field::NEXT_HEADER],
            hop_limit: b[field::HOP_LIMIT],
            src: Ipv6Addr::from(src),
            dst: Ipv6Addr::from(dst),
        })
    }

    /// Parses an IPv6 header.
    #[inline]
    pub fn parse(b: &[u8]) -> Result<Self> {
        Self::parse_as(Header::Ipv6, b)
    }

    /// Parses a GRH: version 6 and next header 0x1B.
    #[inline]
    pub fn parse_grh(b: &[u8]) -> Result<Self> {
        let r = Self::parse_as(Header::Grh, b)?;
        if r.next_header != NEXT_HEADER_IBA {
            return Err(Error::BadNextHeader {
                value: r.next_header,
            });
        }
        Ok(r)
    }

    /// DSCP: the high six bits of the traffic class.
    pub fn dscp(&self) -> u8 {
        self.traffic_class >> 2
    }

    /// ECN: the low two bits of the traffic class; 3 is CE.
    pub fn ecn(&self) -> u8 {
        self.traffic_class & 3
    }

    /// Writes the 40-byte header.
    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        crate::field::check(Header::Ipv6, HEADER_LEN, b.len())?;
        if self.flow_label > MAX_FLOW_LABEL {
            return Err(Error::FieldOverflow {
                field: "ipv6.flow_label",
                value: self.flow_label.into(),
            });
        }
        let w =
            (u32::from(VERSION) << 28) | (u32::from(self.traffic_class) << 20) | self.flow_label;
        write_u32(b, field::VER_TC_FLOW, w);
        write_u16(b, field::PAYLOAD_LEN, self.payload_len);
        b[field::NEXT_HEADER] = self.next_header;
        b[field::HOP_LIMIT] = self.hop_limit;
        b[field::SRC].copy_from_slice(&self.src.octets());
        b[field::DST].copy_from_slice(&self.dst.octets());
        Ok(())
    }
}
