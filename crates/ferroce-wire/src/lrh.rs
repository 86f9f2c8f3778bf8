//! Local Route Header (IBA vol. 1 §7.7), 8 bytes, and the VCRC that ends a
//! native InfiniBand packet. RoCE carries neither: they are here so that a
//! native IB packet (as captured on an IB link) can be decoded too.
//!
//! ```text
//!  0      VL(4) | LVer(4)
//!  1      SL(4) | resv(2) | LNH(2)
//!  2..4   DLID
//!  4..6   resv(5) | PktLen(11)   (4-byte words, LRH through ICRC)
//!  6..8   SLID
//! ```
//!
//! The VCRC follows IBA §7.8.2 as we read it (CRC-16, polynomial 0x100B,
//! initial value 0xFFFF, reflected like the ICRC, inverted, stored
//! least-significant byte first); no independent implementation was at hand
//! to confirm it, so treat a VCRC verdict as advisory.

use crate::field::{read_u16, write_u16};
use crate::{Error, Header, Result};

/// LRH length.
pub const HEADER_LEN: usize = 8;
/// VCRC length.
pub const VCRC_LEN: usize = 2;

/// What follows the LRH (the LNH field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NextHeader {
    /// Raw packet (0).
    Raw,
    /// IP, non-IBA transport (1).
    Ip,
    /// IBA local: a BTH follows (2).
    IbaLocal,
    /// IBA global: a GRH follows (3).
    IbaGlobal,
}

/// The content of an LRH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LrhRepr {
    /// VL: the virtual lane, 4 bits (15 is VL15, management).
    pub vl: u8,
    /// LVer: the link version, 0.
    pub lver: u8,
    /// SL: the service level, 4 bits.
    pub sl: u8,
    /// LNH: which header follows.
    pub next: NextHeader,
    /// DLID: the destination LID.
    pub dlid: u16,
    /// Packet length in 4-byte words, LRH through ICRC.
    pub pkt_len: u16,
    /// SLID: the source LID.
    pub slid: u16,
}

impl LrhRepr {
    /// Parses the 8-byte LRH at the start of `b`; rejects a short buffer and an LVer other than 0.
    /// The reserved bits are ignored.
    pub fn parse(b: &[u8]) -> Result<Self> {
        crate::field::check(Header::Lrh, HEADER_LEN, b.len())?;
        if b[0] & 0xf != 0 {
            return Err(Error::BadVersion {
                field: "lrh.lver",
                value: b[0] & 0xf,
            });
        }
        Ok(Self {
            vl: b[0] >> 4,
            lver: b[0] & 0xf,
            sl: b[1] >> 4,
            next: match b[1] & 3 {
                0 => NextHeader::Raw,
                1 => NextHeader::Ip,
                2 => NextHeader::IbaLocal,
                _ => NextHeader::IbaGlobal,
            },
            dlid: read_u16(b, 2..4),
            pkt_len: read_u16(b, 4..6) & 0x7ff,
            slid: read_u16(b, 6..8),
        })
    }

    /// Writes the 8-byte LRH; rejects a short buffer and a PktLen above 11 bits.
    /// VL and SL keep only their low four bits; reserved bits are written as zero.
    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        crate::field::check(Header::Lrh, HEADER_LEN, b.len())?;
        if self.pkt_len > 0x7ff {
            return Err(Error::FieldOverflow {
                field: "lrh.pkt_len",
                value: self.pkt_len.into(),
            });
        }
        b[0] = (self.vl << 4) | (self.lver & 0xf);
        b[1] = (self.sl << 4) | self.next as u8;
        write_u16(b, 2..4, self.dlid);
        write_u16(b, 4..6, self.pkt_len);
        write_u16(b, 6..8, self.slid);
        Ok(())
    }
}

/// The VCRC over `packet` (LRH through ICRC).
pub fn vcrc(packet: &[u8]) -> u16 {
    const POLY_REFLECTED: u16 = 0xd008; // 0x100B, bit-reversed
    let mut crc: u16 = 0xffff;
    for &byte in packet {
        crc ^= u16::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY_REFLECTED
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Checks the VCRC at the end of a native IB packet (`packet` ends with it).
pub fn verify_vcrc(packet: &[u8]) -> Result<()> {
    crate::field::check(Header::Vcrc, HEADER_LEN + VCRC_LEN, packet.len())?;
    let (body, tail) = packet.split_at(packet.len() - VCRC_LEN);
    let received = u16::from_le_bytes([tail[0], tail[1]]);
    let computed = vcrc(body);
    if computed == received {
        Ok(())
    } else {
        Err(Error::BadVcrc { computed, received })
    }
}
