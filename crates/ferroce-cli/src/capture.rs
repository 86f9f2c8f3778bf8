//! Packet capture files for `ferroce dump`: read classic pcap and pcapng, write classic pcap.
//!
//! Contract:
//! * [`FrameReader`] yields every packet record of a file or stream in file order, holding
//!   one record at a time (memory stays bounded whatever the capture's size); records are
//!   numbered from 1 exactly like Wireshark's `frame.number`. Non-RoCE packets count; so do
//!   the few pcapng blocks without a packet that Wireshark lists as frames (custom, systemd
//!   journal and Sysdig event blocks), which are not returned: numbers then skip them.
//!   The format is chosen by magic number:
//!   classic pcap in either byte order with micro- or nanosecond timestamps, or pcapng with
//!   any number of sections and interfaces, each interface with its own link type,
//!   `if_tsresol` and `if_tsoffset`; Enhanced, Simple and (obsolete) Packet Blocks are read.
//!   A Simple Packet Block has no timestamp: its frame gets [`Duration::ZERO`].
//! * Link types 1 (Ethernet), 113 (Linux cooked v1), 276 (Linux cooked v2), 101, 228 and
//!   229 (raw IP) are accepted; a packet on any other link type is an error naming it.
//! * [`write_pcap`] writes a little-endian classic pcap with nanosecond timestamps and a
//!   snapshot length of [`WRITE_SNAPLEN`]; `orig_len` of every record is its data length.
//! * Any malformed, truncated or foreign file gives a [`CaptureError`] naming the file and
//!   the fault; no input makes these functions panic.
//!
//! `pcap-file` 2 supplies the file header, record and block framing, the section byte order
//! and the Interface Description Blocks. Its packet-level conveniences are bypassed where
//! they differ from Wireshark: `PcapPacket` rejects `orig_len > snaplen` (every capture taken
//! with a short snaplen), `EnhancedPacketBlock::timestamp` is the raw tick count whatever
//! the interface's `if_tsresol`, a `SimplePacketBlock`'s data includes the block padding,
//! and a malformed packet-block option (say, a comment that is not UTF-8) would reject the
//! packet. So packet blocks are decoded here from their fixed fields; options are ignored.

use std::time::Duration;

#[cfg(test)]
use std::fs::File;
#[cfg(test)]
use std::path::Path;

mod error;
mod reader;
#[cfg(test)]
mod tests;
mod writer;

use error::pcap_file_error;
pub(crate) use error::{CaptureError, CaptureErrorKind};
pub(crate) use reader::FrameReader;
pub(crate) use writer::write_pcap;

/// Snapshot length written by [`write_pcap`] (tcpdump's default; Wireshark's limit for
/// Ethernet). Longer frames are refused.
pub(crate) const WRITE_SNAPLEN: u32 = 262_144;

const PCAP_MAGICS: [[u8; 4]; 4] = [
    [0xA1, 0xB2, 0xC3, 0xD4], // big-endian, microseconds
    [0xD4, 0xC3, 0xB2, 0xA1], // little-endian, microseconds
    [0xA1, 0xB2, 0x3C, 0x4D], // big-endian, nanoseconds
    [0x4D, 0x3C, 0xB2, 0xA1], // little-endian, nanoseconds
];
/// pcapng Section Header Block type; the same bytes in both byte orders.
const PCAPNG_MAGIC: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];

const PCAPNG_PACKET_BLOCK: u32 = 0x0000_0002;
const PCAPNG_SIMPLE_PACKET_BLOCK: u32 = 0x0000_0003;
const PCAPNG_ENHANCED_PACKET_BLOCK: u32 = 0x0000_0006;
/// pcapng blocks that Wireshark (4.0) lists as frames although they hold no packet: Custom
/// Blocks (both kinds), systemd Journal Export Blocks and Sysdig event blocks. They take a
/// frame number but are not returned.
const PCAPNG_NUMBERED_NON_PACKETS: [u32; 6] = [
    0x0000_0BAD,
    0x4000_0BAD,
    0x0000_0009,
    0x0000_0204,
    0x0000_0216,
    0x0000_0221,
];

pub(crate) use ferroce_wire::LinkType;

/// Maps a pcap / pcapng link-type number; `None` for the ones this module does not read:
/// 1 Ethernet, 113 Linux cooked v1, 276 Linux cooked v2, 101/228/229 raw IP.
fn link_from_number(linktype: u32) -> Option<LinkType> {
    match linktype {
        1 => Some(LinkType::Ethernet),
        113 => Some(LinkType::LinuxSll),
        276 => Some(LinkType::LinuxSll2),
        101 | 228 | 229 => Some(LinkType::RawIp),
        _ => None,
    }
}

/// The link-type number written to a file.
fn link_number(link: LinkType) -> u32 {
    match link {
        LinkType::Ethernet => 1,
        LinkType::LinuxSll => 113,
        LinkType::LinuxSll2 => 276,
        LinkType::RawIp => 101,
    }
}

/// One packet record of a capture file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    /// 1-based position among the file's packet records; equals Wireshark's `frame.number`.
    pub(crate) number: u64,
    /// Capture time since the Unix epoch (zero for a pcapng Simple Packet Block).
    pub(crate) timestamp: Duration,
    /// Length of the packet on the wire; more than `data.len()` if the capture cut it short.
    pub(crate) orig_len: u32,
    /// Framing of `data`.
    pub(crate) link: LinkType,
    /// The captured bytes, starting with the link-layer header.
    pub(crate) data: Vec<u8>,
}

/// Reads every packet record of the pcap or pcapng file at `path` (all in
/// memory: for tests; `dump` streams with [`FrameReader`]).
#[cfg(test)]
pub(crate) fn read_frames(path: &Path) -> Result<Vec<Frame>, CaptureError> {
    let err = |kind| CaptureError {
        path: path.to_path_buf(),
        kind,
    };
    let file = File::open(path).map_err(|e| err(CaptureErrorKind::Io(e)))?;
    FrameReader::new(file)
        .collect::<Result<_, _>>()
        .map_err(err)
}

/// [`read_frames`] on a file's contents.
#[cfg(test)]
fn parse_capture(bytes: &[u8]) -> Result<Vec<Frame>, CaptureErrorKind> {
    FrameReader::new(bytes).collect()
}
