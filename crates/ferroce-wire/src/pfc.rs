//! MAC control frames (ethertype 0x8808): IEEE 802.1Qbb priority-based flow
//! control (PFC, opcode 0x0101), which lossless RoCE fabrics run on, and
//! the 802.3x link PAUSE (opcode 0x0001) it extends.
//!
//! Layout after the Ethernet header (802.3 Annex 31B and 31D, as
//! Wireshark's `macc` dissector shows it):
//!
//! | bytes | PAUSE | PFC |
//! |---|---|---|
//! | 0..2 | opcode 0x0001 | opcode 0x0101 |
//! | 2..4 | pause time | class-enable vector: bit N enables priority N (high byte reserved) |
//! | 4..20 | (reserved, zero) | eight 16-bit pause times, priority 0 first |
//!
//! Pause times are in quanta of 512 bit times, so their length in time
//! depends on the link speed ([`quanta_to_micros`]). Both go to the
//! reserved multicast address 01:80:C2:00:00:01 and are padded to the
//! 64-byte minimum frame. Parsing takes any bytes and never panics: a short
//! frame is `Err(Truncated)`; an opcode other than these two is
//! [`MacControlRepr::Other`] (EPON's MPCP uses the same ethertype), not an
//! error; the reserved bits of the vector are ignored on receive as 802.1Qbb
//! says, and emitted as zero.

use crate::ethernet::{self, EthernetRepr};
use crate::field::{Field, read_u16, write_u16};
use crate::view::header_view;
use crate::{Error, Header, Result};

/// Ethertype of MAC control frames.
pub const ETHERTYPE_MAC_CONTROL: u16 = 0x8808;
/// 802.3x PAUSE.
pub const OPCODE_PAUSE: u16 = 0x0001;
/// 802.1Qbb priority-based flow control.
pub const OPCODE_PFC: u16 = 0x0101;
/// The destination of PAUSE and PFC frames (never forwarded by a bridge).
pub const DST_MAC_CONTROL: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x01];
/// Priorities (traffic classes) PFC can pause.
pub const PRIORITIES: usize = 8;
/// Bit times in one pause quantum.
pub const BITS_PER_QUANTUM: u64 = 512;
/// The smallest Ethernet frame without its FCS: frames are padded to it.
pub const MIN_FRAME_LEN: usize = 60;

mod field {
    use super::Field;
    pub(super) const OPCODE: Field = 0..2;
    /// PAUSE: the pause time. PFC: the class-enable vector.
    pub(super) const WORD1: Field = 2..4;
    /// PFC: pause time of priority `n` (0..8).
    pub(super) const fn time(n: usize) -> Field {
        4 + 2 * n..6 + 2 * n
    }
}

/// Bytes of a PFC body (opcode, vector, eight times); a PAUSE needs 4.
pub const PFC_LEN: usize = field::time(PRIORITIES - 1).end;
const PAUSE_LEN: usize = field::WORD1.end;

header_view!(
    /// A view over a MAC control body (the bytes after the ethertype).
    /// `LEN` is the PFC body's; a PAUSE needs only its first 4 bytes, which
    /// [`MacControlRepr::parse`] accepts.
    PfcFrame,
    Header::Ethernet,
    PFC_LEN
);

impl<T: AsRef<[u8]>> PfcFrame<T> {
    /// The MAC control opcode: [`OPCODE_PAUSE`], [`OPCODE_PFC`] or another.
    pub fn opcode(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::OPCODE)
    }
    /// The class-enable vector, reserved high byte included.
    pub fn class_enable(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::WORD1)
    }
    /// Pause time of `priority` (0..8) in quanta; 0 for other numbers.
    pub fn pause_quanta(&self, priority: usize) -> u16 {
        if priority < PRIORITIES {
            read_u16(self.buffer.as_ref(), field::time(priority))
        } else {
            0
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> PfcFrame<T> {
    /// Sets the MAC control opcode.
    pub fn set_opcode(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::OPCODE, v);
    }
    /// Sets the class-enable vector (PFC) or the pause time (PAUSE).
    pub fn set_class_enable(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::WORD1, v);
    }
    /// Sets the pause time of `priority` (0..8); other numbers are ignored.
    pub fn set_pause_quanta(&mut self, priority: usize, quanta: u16) {
        if priority < PRIORITIES {
            write_u16(self.buffer.as_mut(), field::time(priority), quanta);
        }
    }
}

/// The content of a MAC control frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacControlRepr {
    /// 802.3x PAUSE: stop all traffic for `quanta`.
    Pause {
        /// Pause time in quanta of 512 bit times; 0 resumes at once.
        quanta: u16,
    },
    /// 802.1Qbb PFC: for each priority whose bit is set in `enabled`, stop
    /// it for `quanta[priority]` (0 resumes it at once).
    Pfc {
        /// Class-enable vector: bit N set means `quanta[N]` applies to priority N.
        enabled: u8,
        /// Pause time of each priority in quanta, priority 0 first.
        quanta: [u16; PRIORITIES],
    },
    /// Another MAC control opcode (not decoded).
    Other {
        /// The opcode.
        opcode: u16,
    },
}

impl MacControlRepr {
    /// Parses the body of a MAC control frame (the bytes after ethertype
    /// 0x8808). Bytes past the fields (padding) are ignored.
    pub fn parse(body: &[u8]) -> Result<Self> {
        crate::field::check(Header::Ethernet, field::OPCODE.end, body.len())?;
        match read_u16(body, field::OPCODE) {
            OPCODE_PAUSE => {
                crate::field::check(Header::Ethernet, PAUSE_LEN, body.len())?;
                Ok(Self::Pause {
                    quanta: read_u16(body, field::WORD1),
                })
            }
            OPCODE_PFC => {
                let v = PfcFrame::new_checked(body)?;
                Ok(Self::Pfc {
                    // The high byte is reserved: ignored on receive.
                    enabled: v.class_enable() as u8,
                    quanta: std::array::from_fn(|p| v.pause_quanta(p)),
                })
            }
            opcode => Ok(Self::Other { opcode }),
        }
    }

    /// Bytes [`emit`](Self::emit) writes (before padding).
    pub fn body_len(&self) -> usize {
        match self {
            Self::Pause { .. } => PAUSE_LEN,
            Self::Pfc { .. } => PFC_LEN,
            Self::Other { .. } => field::OPCODE.end,
        }
    }

    /// Writes the body; returns its length.
    pub fn emit(&self, body: &mut [u8]) -> Result<usize> {
        let len = self.body_len();
        if body.len() < len {
            return Err(Error::BufferTooSmall {
                needed: len,
                available: body.len(),
            });
        }
        match *self {
            Self::Pause { quanta } => {
                write_u16(body, field::OPCODE, OPCODE_PAUSE);
                write_u16(body, field::WORD1, quanta);
            }
            Self::Pfc { enabled, quanta } => {
                let mut v = PfcFrame::new_unchecked(&mut body[..PFC_LEN]);
                v.set_opcode(OPCODE_PFC);
                v.set_class_enable(enabled.into());
                for (p, q) in quanta.into_iter().enumerate() {
                    v.set_pause_quanta(p, q);
                }
            }
            Self::Other { opcode } => write_u16(body, field::OPCODE, opcode),
        }
        Ok(len)
    }

    /// The priorities this frame pauses or resumes, with their quanta
    /// (PAUSE: one entry, priority `None`, meaning all traffic).
    pub fn entries(&self) -> Vec<(Option<u8>, u16)> {
        match *self {
            Self::Pause { quanta } => vec![(None, quanta)],
            Self::Pfc { enabled, quanta } => (0..PRIORITIES as u8)
                .filter(|p| enabled & (1 << p) != 0)
                .map(|p| (Some(p), quanta[usize::from(p)]))
                .collect(),
            Self::Other { .. } => Vec::new(),
        }
    }
}

/// Parses `frame` as an Ethernet frame; `Ok(None)` if it is not MAC
/// control (ethertype 0x8808, under at most one 802.1Q tag).
pub fn parse_frame(frame: &[u8]) -> Result<Option<(EthernetRepr, MacControlRepr)>> {
    let (eth, off) = EthernetRepr::parse(frame)?;
    if eth.ethertype != ETHERTYPE_MAC_CONTROL {
        return Ok(None);
    }
    Ok(Some((eth, MacControlRepr::parse(&frame[off..])?)))
}

/// A whole MAC control frame from `src` to 01:80:C2:00:00:01, padded to
/// 60 bytes (the NIC adds the FCS).
pub fn frame(src: [u8; 6], repr: &MacControlRepr) -> Vec<u8> {
    let eth = EthernetRepr {
        dst: DST_MAC_CONTROL,
        src,
        vlan: None,
        ethertype: ETHERTYPE_MAC_CONTROL,
    };
    let mut out = vec![0; (ethernet::HEADER_LEN + repr.body_len()).max(MIN_FRAME_LEN)];
    // The buffer is sized for both: neither emit can fail.
    let _ = eth.emit(&mut out);
    let _ = repr.emit(&mut out[ethernet::HEADER_LEN..]);
    out
}

/// How long `quanta` pause at `link_mbps` Mbit/s, in microseconds (one
/// quantum is 512 bit times: 5.12 ns at 100 Gbit/s, 0.512 µs at 1 Gbit/s).
pub fn quanta_to_micros(quanta: u16, link_mbps: u32) -> Option<f64> {
    (link_mbps > 0).then(|| (u64::from(quanta) * BITS_PER_QUANTUM) as f64 / f64::from(link_mbps))
}

#[cfg(test)]
mod tests;
