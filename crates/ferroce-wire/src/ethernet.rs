//! Ethernet II with at most one 802.1Q tag (whose PCP carries the priority
//! that PFC acts on).
//!
//! Not supported: 802.3 length frames, stacked (QinQ) tags beyond the first,
//! the frame check sequence (captures do not carry it).

use crate::field::{read_u16, write_u16};
use crate::{Error, Header, Result};

/// Ethertype of RoCE v1 (IBA Annex A16).
pub const ETHERTYPE_ROCE_V1: u16 = 0x8915;
pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// 802.1ad service tag.
pub const ETHERTYPE_QINQ: u16 = 0x88a8;

/// Length of the untagged header.
pub const HEADER_LEN: usize = 14;
/// Length of one 802.1Q tag.
pub const VLAN_LEN: usize = 4;

/// An 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Priority code point, 0-7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN id, 0-4095.
    pub vid: u16,
}

impl VlanTag {
    fn from_tci(tci: u16) -> Self {
        Self {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }
    fn tci(self) -> u16 {
        (u16::from(self.pcp & 7) << 13) | (u16::from(self.dei) << 12) | (self.vid & 0x0fff)
    }
}

/// The content of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub vlan: Option<VlanTag>,
    /// The ethertype of what follows (after the tag, if any).
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Parses the header at the start of `frame`; returns it and its length.
    #[inline]
    pub fn parse(frame: &[u8]) -> Result<(Self, usize)> {
        crate::field::check(Header::Ethernet, HEADER_LEN, frame.len())?;
        let mut dst = [0; 6];
        let mut src = [0; 6];
        dst.copy_from_slice(&frame[0..6]);
        src.copy_from_slice(&frame[6..12]);
        let et = read_u16(frame, 12..14);
        if et == ETHERTYPE_VLAN || et == ETHERTYPE_QINQ {
            crate::field::check(Header::Vlan, HEADER_LEN + VLAN_LEN, frame.len())?;
            let repr = Self {
                dst,
                src,
                vlan: Some(VlanTag::from_tci(read_u16(frame, 14..16))),
                ethertype: read_u16(frame, 16..18),
            };
            return Ok((repr, HEADER_LEN + VLAN_LEN));
        }
        Ok((
            Self {
                dst,
                src,
                vlan: None,
                ethertype: et,
            },
            HEADER_LEN,
        ))
    }

    /// Header length, tag included.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + if self.vlan.is_some() { VLAN_LEN } else { 0 }
    }

    /// Writes the header; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.header_len();
        if buf.len() < len {
            return Err(Error::BufferTooSmall {
                needed: len,
                available: buf.len(),
            });
        }
        buf[0..6].copy_from_slice(&self.dst);
        buf[6..12].copy_from_slice(&self.src);
        match self.vlan {
            Some(tag) => {
                write_u16(buf, 12..14, ETHERTYPE_VLAN);
                write_u16(buf, 14..16, tag.tci());
                write_u16(buf, 16..18, self.ethertype);
            }
            None => write_u16(buf, 12..14, self.ethertype),
        }
        Ok(len)
    }
}
