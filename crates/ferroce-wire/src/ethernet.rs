//! Ethernet II with at most one 802.1Q tag (whose PCP carries the priority
//! that PFC acts on).
//!
//! Not supported: 802.3 length frames, stacked (QinQ) tags beyond the first,
//! the frame check sequence (captures do not carry it).

use crate::field::{Field, read_u16, write_u16};
use crate::{Error, Header, Result};

mod field {
    use super::Field;
    pub(super) const DST: Field = 0..6;
    pub(super) const SRC: Field = 6..12;
    /// The ethertype, or the tag's TPID (0x8100) when tagged.
    pub(super) const ETHERTYPE: Field = 12..14;
    /// With a tag: its TCI (PCP, DEI, VID), then the real ethertype.
    pub(super) const TCI: Field = 14..16;
    pub(super) const TAGGED_ETHERTYPE: Field = 16..18;
}

/// PCP's bits of a TCI.
const TCI_PCP_SHIFT: u16 = 13;
/// DEI's bit of a TCI.
const TCI_DEI: u16 = 0x1000;
/// VID's bits of a TCI.
const TCI_VID: u16 = 0x0fff;

/// Ethertype of RoCE v1 (IBA Annex A16).
pub const ETHERTYPE_ROCE_V1: u16 = 0x8915;
/// Ethertype of IPv4 (RoCE v2 over IPv4).
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// Ethertype of IPv6 (RoCE v2 over IPv6).
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// Ethertype (TPID) of an 802.1Q tag.
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
    /// The tag of a Tag Control Information word (as a packet socket
    /// reports a tag the kernel took off a received frame).
    pub fn from_tci(tci: u16) -> Self {
        Self {
            pcp: (tci >> TCI_PCP_SHIFT) as u8,
            dei: tci & TCI_DEI != 0,
            vid: tci & TCI_VID,
        }
    }
    /// The Tag Control Information word of this tag.
    pub fn tci(self) -> u16 {
        let dei = if self.dei { TCI_DEI } else { 0 };
        (u16::from(self.pcp & 7) << TCI_PCP_SHIFT) | dei | (self.vid & TCI_VID)
    }
}

/// The content of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    /// Destination MAC address.
    pub dst: [u8; 6],
    /// Source MAC address.
    pub src: [u8; 6],
    /// The 802.1Q tag, if the frame has one.
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
        dst.copy_from_slice(&frame[field::DST]);
        src.copy_from_slice(&frame[field::SRC]);
        let et = read_u16(frame, field::ETHERTYPE);
        if et == ETHERTYPE_VLAN || et == ETHERTYPE_QINQ {
            crate::field::check(Header::Vlan, HEADER_LEN + VLAN_LEN, frame.len())?;
            let repr = Self {
                dst,
                src,
                vlan: Some(VlanTag::from_tci(read_u16(frame, field::TCI))),
                ethertype: read_u16(frame, field::TAGGED_ETHERTYPE),
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
        buf[field::DST].copy_from_slice(&self.dst);
        buf[field::SRC].copy_from_slice(&self.src);
        match self.vlan {
            Some(tag) => {
                write_u16(buf, field::ETHERTYPE, ETHERTYPE_VLAN);
                write_u16(buf, field::TCI, tag.tci());
                write_u16(buf, field::TAGGED_ETHERTYPE, self.ethertype);
            }
            None => write_u16(buf, field::ETHERTYPE, self.ethertype),
        }
        Ok(len)
    }
}
