//! IPv4 header (RFC 791) as RoCE v2 carries it. TOS (DSCP + ECN), TTL and the
//! header checksum vary in flight and are masked out of the ICRC; the total
//! length and Identification are covered by it.

use std::net::Ipv4Addr;

use crate::field::{read_u16, write_u16};
use crate::{Error, Header, Result};

/// Minimum (option-less) header length.
pub const MIN_HEADER_LEN: usize = 20;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;

/// The content of an IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Header length in bytes (IHL x 4); more than 20 means options.
    pub header_len: u8,
    pub dscp: u8,
    pub ecn: u8,
    pub total_len: u16,
    pub ident: u16,
    pub dont_frag: bool,
    pub more_frags: bool,
    /// Fragment offset in 8-byte units.
    pub frag_offset: u16,
    pub ttl: u8,
    pub protocol: u8,
    pub checksum: u16,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
}

impl Ipv4Repr {
    /// Parses the header at the start of `b`. Checks the version and the
    /// header length; the checksum is reported by [`checksum_ok`], not judged.
    #[inline]
    pub fn parse(b: &[u8]) -> Result<Self> {
        crate::field::check(Header::Ipv4, MIN_HEADER_LEN, b.len())?;
        if b[0] >> 4 != 4 {
            return Err(Error::BadVersion {
                field: "ipv4.version",
                value: b[0] >> 4,
            });
        }
        let header_len = (b[0] & 0xf) * 4;
        if usize::from(header_len) < MIN_HEADER_LEN {
            return Err(Error::BadLength {
                field: "ipv4.ihl",
                claimed: header_len.into(),
                actual: MIN_HEADER_LEN,
            });
        }
        crate::field::check(Header::Ipv4, header_len.into(), b.len())?;
        let frag = read_u16(b, 6..8);
        Ok(Self {
            header_len,
            dscp: b[1] >> 2,
            ecn: b[1] & 3,
            total_len: read_u16(b, 2..4),
            ident: read_u16(b, 4..6),
            dont_frag: frag & 0x4000 != 0,
            more_frags: frag & 0x2000 != 0,
            frag_offset: frag & 0x1fff,
            ttl: b[8],
            protocol: b[9],
            checksum: read_u16(b, 10..12),
            src: Ipv4Addr::new(b[12], b[13], b[14], b[15]),
            dst: Ipv4Addr::new(b[16], b[17], b[18], b[19]),
        })
    }

    /// Whether this is a fragment (MF set or a non-zero offset).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.more_frags || self.frag_offset != 0
    }

    /// Writes an option-less 20-byte header with a correct checksum (the
    /// `checksum` and `header_len` fields are ignored).
    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        crate::field::check(Header::Ipv4, MIN_HEADER_LEN, b.len())?;
        b[0] = 0x45;
        b[1] = (self.dscp << 2) | (self.ecn & 3);
        write_u16(b, 2..4, self.total_len);
        write_u16(b, 4..6, self.ident);
        let frag = (u16::from(self.dont_frag) << 14)
            | (u16::from(self.more_frags) << 13)
            | (self.frag_offset & 0x1fff);
        write_u16(b, 6..8, frag);
        b[8] = self.ttl;
        b[9] = self.protocol;
        write_u16(b, 10..12, 0);
        b[12..16].copy_from_slice(&self.src.octets());
        b[16..20].copy_from_slice(&self.dst.octets());
        let c = checksum(&b[..MIN_HEADER_LEN]);
        write_u16(b, 10..12, c);
        Ok(())
    }
}

/// The Internet checksum of `header` (with its checksum field as it is).
pub fn checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let (words, odd) = header.as_chunks::<2>();
    for w in words {
        sum += u32::from(u16::from_be_bytes(*w));
    }
    if let [last] = odd {
        sum += u32::from(*last) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Whether the header checksum of the `header_len`-byte header at the start of `b` verifies.
pub fn checksum_ok(b: &[u8], header_len: usize) -> bool {
    b.len() >= header_len && checksum(&b[..header_len]) == 0
}
