//! IPv4 header (RFC 791) as RoCE v2 carries it. TOS (DSCP + ECN), TTL and the
//! header checksum vary in flight and are masked out of the ICRC; the total
//! length and Identification are covered by it.

use std::net::Ipv4Addr;

use crate::field::{Field, read_u16, write_u16};
use crate::{Error, Header, Result};

/// Minimum (option-less) header length.
pub const MIN_HEADER_LEN: usize = 20;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IP version 4, in the header's first nibble.
pub const VERSION: u8 = 4;
/// Don't Fragment, in the flags and fragment offset word.
pub const DONT_FRAG: u16 = 0x4000;
/// More Fragments, in the flags and fragment offset word.
pub const MORE_FRAGS: u16 = 0x2000;
/// The fragment offset's bits of that word.
pub const FRAG_OFFSET: u16 = 0x1fff;
/// Where the Identification lies in the header.
pub const IDENT: std::ops::Range<usize> = field::IDENT;

pub(crate) mod field {
    use super::Field;
    /// Version (high nibble) and IHL (low nibble, in 4-byte words).
    pub(crate) const VER_IHL: usize = 0;
    /// DSCP (high 6 bits) and ECN (low 2).
    pub(crate) const TOS: usize = 1;
    pub(crate) const TOTAL_LEN: Field = 2..4;
    pub(crate) const IDENT: Field = 4..6;
    pub(crate) const FLAGS_FRAG: Field = 6..8;
    pub(crate) const TTL: usize = 8;
    pub(crate) const PROTOCOL: usize = 9;
    pub(crate) const CHECKSUM: Field = 10..12;
    pub(crate) const SRC: Field = 12..16;
    pub(crate) const DST: Field = 16..20;
}

/// Bytes of an option-less header after the Identification (the ICRC
/// solver on IPv4 receive needs where those 16 bits sit).
pub const AFTER_IDENT: usize = MIN_HEADER_LEN - field::IDENT.end;

/// The content of an IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Header length in bytes (IHL x 4); more than 20 means options.
    pub header_len: u8,
    /// DSCP: the differentiated services code point, 6 bits.
    pub dscp: u8,
    /// ECN: 2 bits; 3 (CE) marks congestion, which a RoCE v2 receiver answers with a CNP.
    pub ecn: u8,
    /// Total Length: header plus payload, in bytes.
    pub total_len: u16,
    /// Identification.
    pub ident: u16,
    /// DF: don't fragment.
    pub dont_frag: bool,
    /// MF: more fragments follow.
    pub more_frags: bool,
    /// Fragment offset in 8-byte units.
    pub frag_offset: u16,
    /// Time to Live.
    pub ttl: u8,
    /// Protocol: 17 (UDP) for RoCE v2.
    pub protocol: u8,
    /// Header Checksum, as read (see [`checksum_ok`]).
    pub checksum: u16,
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
}

impl Ipv4Repr {
    /// Parses the header at the start of `b`. Checks the version and the
    /// header length; the checksum is reported by [`checksum_ok`], not judged.
    #[inline]
    pub fn parse(b: &[u8]) -> Result<Self> {
        crate::field::check(Header::Ipv4, MIN_HEADER_LEN, b.len())?;
        let ver_ihl = b[field::VER_IHL];
        if ver_ihl >> 4 != VERSION {
            return Err(Error::BadVersion {
                field: "ipv4.version",
                value: ver_ihl >> 4,
            });
        }
        let header_len = (ver_ihl & 0xf) * 4;
        if usize::from(header_len) < MIN_HEADER_LEN {
            return Err(Error::BadLength {
                field: "ipv4.ihl",
                claimed: header_len.into(),
                actual: MIN_HEADER_LEN,
            });
        }
        crate::field::check(Header::Ipv4, header_len.into(), b.len())?;
        let frag = read_u16(b, field::FLAGS_FRAG);
        let addr =
            |f: Field| Ipv4Addr::new(b[f.start], b[f.start + 1], b[f.start + 2], b[f.start + 3]);
        Ok(Self {
            header_len,
            dscp: b[field::TOS] >> 2,
            ecn: b[field::TOS] & 3,
            total_len: read_u16(b, field::TOTAL_LEN),
            ident: read_u16(b, field::IDENT),
            dont_frag: frag & DONT_FRAG != 0,
            more_frags: frag & MORE_FRAGS != 0,
            frag_offset: frag & FRAG_OFFSET,
            ttl: b[field::TTL],
            protocol: b[field::PROTOCOL],
            checksum: read_u16(b, field::CHECKSUM),
            src: addr(field::SRC),
            dst: addr(field::DST),
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
        let ver_tos = u16::from_be_bytes([
            (VERSION << 4) | (MIN_HEADER_LEN / 4) as u8,
            (self.dscp << 2) | (self.ecn & 3),
        ]);
        let mut frag = self.frag_offset & FRAG_OFFSET;
        if self.dont_frag {
            frag |= DONT_FRAG;
        }
        if self.more_frags {
            frag |= MORE_FRAGS;
        }
        let ttl_proto = u16::from_be_bytes([self.ttl, self.protocol]);
        let addrs = [self.src.octets(), self.dst.octets()];
        // The checksum is summed from the words as computed, not read back
        // from `b`: reading 16-bit words just written a byte at a time
        // stalls the store buffer, which made this the costliest step of
        // framing a packet on the raw backend.
        let addr_words = addrs.as_flattened().as_chunks::<2>().0;
        let words = [ver_tos, self.total_len, self.ident, frag, ttl_proto]
            .into_iter()
            .chain(addr_words.iter().map(|w| u16::from_be_bytes(*w)));
        let c = fold(words.map(u32::from).sum());
        write_u16(b, field::VER_IHL..field::TOS + 1, ver_tos);
        write_u16(b, field::TOTAL_LEN, self.total_len);
        write_u16(b, field::IDENT, self.ident);
        write_u16(b, field::FLAGS_FRAG, frag);
        write_u16(b, field::TTL..field::PROTOCOL + 1, ttl_proto);
        write_u16(b, field::CHECKSUM, c);
        b[field::SRC].copy_from_slice(&addrs[0]);
        b[field::DST].copy_from_slice(&addrs[1]);
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
    fold(sum)
}

/// The one's complement of a 32-bit sum of 16-bit words, folded to 16 bits.
fn fold(mut sum: u32) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Whether the header checksum of the `header_len`-byte header at the start of `b` verifies.
pub fn checksum_ok(b: &[u8], header_len: usize) -> bool {
    b.len() >= header_len && checksum(&b[..header_len]) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(dscp: u8, ident: u16, dont_frag: bool) -> Ipv4Repr {
        Ipv4Repr {
            header_len: MIN_HEADER_LEN as u8,
            dscp,
            ecn: 0,
            total_len: 0x73,
            ident,
            dont_frag,
            more_frags: false,
            frag_offset: 0,
            ttl: 0x40,
            protocol: PROTO_UDP,
            checksum: 0,
            src: [192, 168, 0, 1].into(),
            dst: [192, 168, 0, 199].into(),
        }
    }

    #[test]
    fn emit_writes_the_header_and_its_checksum() {
        // A header whose checksum (0xb861) is worked by hand in RFC 1071's
        // manner: 4500 0073 0000 4000 4011 xxxx c0a8 0001 c0a8 00c7.
        let mut b = [0u8; MIN_HEADER_LEN];
        repr(0, 0, true).emit(&mut b).unwrap();
        let want = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(b, want);
        // Every variant checks, and reads back as emitted.
        for (dscp, ident, df) in [(0x2e, 0xffff, false), (0x3f, 0x1234, true), (1, 1, false)] {
            let r = repr(dscp, ident, df);
            r.emit(&mut b).unwrap();
            assert!(checksum_ok(&b, MIN_HEADER_LEN), "{r:?}");
            let back = Ipv4Repr::parse(&b).unwrap();
            assert_eq!((back.dscp, back.ident, back.dont_frag), (dscp, ident, df));
        }
    }
}
