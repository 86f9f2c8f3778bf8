//! The streaming side of [`super`]: [`FrameReader`] reads a capture from any
//! byte source (a file, standard input) a chunk at a time and yields its
//! packet records one by one. Only the record being decoded is held, so a
//! capture of any length is read in bounded memory: at most
//! [`MAX_RECORD`] bytes of a record plus a chunk.
//!
//! `pcap-file`'s slice parsers do the framing: given the bytes read so far
//! they either return one record or say they need more, and then the
//! reader reads another chunk and asks again.

use std::io::{self, Read};
use std::time::Duration;

use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::PcapNgParser;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::{Endianness, PcapError, TsResolution};

use super::{
    CaptureErrorKind, Frame, LinkType, PCAP_MAGICS, PCAPNG_ENHANCED_PACKET_BLOCK, PCAPNG_MAGIC,
    PCAPNG_NUMBERED_NON_PACKETS, PCAPNG_PACKET_BLOCK, PCAPNG_SIMPLE_PACKET_BLOCK, link_from_number,
    pcap_file_error,
};

/// Bytes read from the source at a time.
const CHUNK: usize = 64 * 1024;
/// The longest record or block accepted: Wireshark's limit for a pcapng
/// block (16 MiB) with room for its framing. A length field beyond it in a
/// long file is malformed rather than a reason to buffer the rest.
const MAX_RECORD: usize = 16 * 1024 * 1024 + 64 * 1024;

/// The packet records of a pcap or pcapng stream, in order.
pub(crate) struct FrameReader<R> {
    src: R,
    /// Bytes read and not yet consumed: `buf[start..end]`.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// File offset of `buf[0]`.
    base: u64,
    eof: bool,
    format: Option<Format>,
    /// An error was returned: the iteration is over.
    done: bool,
    /// The `if_speed` of the last frame's pcapng interface.
    link_speed_bps: Option<u64>,
}

enum Format {
    Pcap {
        parser: PcapParser,
        link: LinkType,
        frac_unit_ns: u64,
        numbered: u64,
    },
    PcapNg {
        parser: PcapNgParser,
        /// Records Wireshark has numbered so far.
        numbered: u64,
    },
}

impl<R: Read> FrameReader<R> {
    pub(crate) fn new(src: R) -> Self {
        Self {
            src,
            buf: vec![0u8; CHUNK],
            start: 0,
            end: 0,
            base: 0,
            eof: false,
            format: None,
            done: false,
            link_speed_bps: None,
        }
    }

    /// The link speed in bit/s that the pcapng interface of the frame last
    /// returned declares (its `if_speed` option); `None` for classic pcap
    /// and for interfaces without one.
    pub(crate) fn link_speed_bps(&self) -> Option<u64> {
        self.link_speed_bps
    }

    fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    fn offset(&self) -> u64 {
        self.base + self.start as u64
    }

    /// Reads more of the source after the pending bytes; false at its end.
    fn fill(&mut self) -> Result<bool, CaptureErrorKind> {
        if self.eof {
            return Ok(false);
        }
        if self.start > 0 {
            // Move the pending bytes to the front (at most one record's).
            self.buf.copy_within(self.start..self.end, 0);
            self.base += self.start as u64;
            self.end -= self.start;
            self.start = 0;
        }
        if self.end > MAX_RECORD {
            return Err(CaptureErrorKind::Malformed {
                what: "record".to_owned(),
                offset: self.offset(),
                detail: format!("longer than {MAX_RECORD} bytes"),
            });
        }
        if self.buf.len() - self.end < CHUNK / 2 {
            // Grown only for a record longer than the buffer; `vec!` of
            // zeroes is a zeroed allocation, not a loop.
            let mut bigger = vec![0u8; self.buf.len().max(CHUNK) * 2];
            bigger[..self.end].copy_from_slice(&self.buf[..self.end]);
            self.buf = bigger;
        }
        let n = loop {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(CaptureErrorKind::Io(e)),
            }
        };
        self.end += n;
        self.eof = n == 0;
        Ok(n > 0)
    }

    /// Runs `parse` on the pending bytes, reading more while it needs
    /// them; `Ok(None)` when the source ended cleanly before a record.
    /// `parse` returns the bytes it consumed and its value.
    fn next_with<T>(
        &mut self,
        what: &dyn Fn() -> String,
        mut parse: impl FnMut(&mut Self) -> Result<(usize, T), PcapError>,
    ) -> Result<Option<T>, CaptureErrorKind> {
        loop {
            if self.pending().is_empty() && !self.fill()? {
                return Ok(None);
            }
            match parse(self) {
                Ok((used, v)) => {
                    self.start += used;
                    return Ok(Some(v));
                }
                Err(PcapError::IncompleteBuffer) => {
                    if !self.fill()? {
                        return Err(CaptureErrorKind::Truncated {
                            what: what(),
                            offset: self.offset(),
                        });
                    }
                }
                Err(e) => return Err(pcap_file_error(e, what(), self.offset())),
            }
        }
    }

    /// Reads the file header (pcap) or first Section Header Block (pcapng).
    fn open(&mut self) -> Result<Format, CaptureErrorKind> {
        while self.pending().len() < 4 && self.fill()? {}
        let magic = self.pending().get(..4);
        if magic.is_some_and(|m| PCAP_MAGICS.iter().any(|p| p == m)) {
            let what = || "pcap file header".to_owned();
            let parser = self
                .next_with(&what, |r| {
                    let all = r.pending();
                    PcapParser::new(all).map(|(rest, p)| (all.len() - rest.len(), p))
                })?
                .ok_or_else(|| CaptureErrorKind::Truncated {
                    what: what(),
                    offset: 0,
                })?;
            let header = parser.header();
            // The upper 16 bits may carry FCS-length flags (libpcap's LT_LINKTYPE mask).
            let linktype = u32::from(header.datalink) & 0xFFFF;
            let link = link_from_number(linktype)
                .ok_or(CaptureErrorKind::UnsupportedLinkType(linktype))?;
            let frac_unit_ns = match header.ts_resolution {
                TsResolution::MicroSecond => 1_000,
                TsResolution::NanoSecond => 1,
            };
            Ok(Format::Pcap {
                parser,
                link,
                frac_unit_ns,
                numbered: 0,
            })
        } else if magic == Some(&PCAPNG_MAGIC[..]) {
            let what = || "pcapng Section Header Block".to_owned();
            let parser = self
                .next_with(&what, |r| {
                    let all = r.pending();
                    PcapNgParser::new(all).map(|(rest, p)| (all.len() - rest.len(), p))
                })?
                .ok_or_else(|| CaptureErrorKind::Truncated {
                    what: what(),
                    offset: 0,
                })?;
            Ok(Format::PcapNg {
                parser,
                numbered: 0,
            })
        } else {
            let head = self.pending()[..self.pending().len().min(4)].to_vec();
            Err(CaptureErrorKind::NotACapture { head })
        }
    }

    fn next_frame(&mut self) -> Result<Option<Frame>, CaptureErrorKind> {
        let mut format = match self.format.take() {
            Some(f) => f,
            None => self.open()?,
        };
        let frame = match &mut format {
            Format::Pcap {
                parser,
                link,
                frac_unit_ns,
                numbered,
            } => self.next_pcap(parser, *link, *frac_unit_ns, numbered),
            Format::PcapNg { parser, numbered } => self.next_pcapng(parser, numbered),
        };
        self.format = Some(format);
        frame
    }

    fn next_pcap(
        &mut self,
        parser: &PcapParser,
        link: LinkType,
        frac_unit_ns: u64,
        numbered: &mut u64,
    ) -> Result<Option<Frame>, CaptureErrorKind> {
        let number = *numbered + 1;
        // Raw records: `PcapPacket` would refuse `orig_len > snaplen` and odd fractions,
        // which Wireshark reads.
        let frame = self.next_with(&|| format!("packet record {number}"), |r| {
            let all = r.pending();
            let (rest, raw) = parser.next_raw_packet(all)?;
            let frame = Frame {
                number,
                timestamp: Duration::from_secs(u64::from(raw.ts_sec))
                    + Duration::from_nanos(u64::from(raw.ts_frac) * frac_unit_ns),
                orig_len: raw.orig_len,
                link,
                data: raw.data.into_owned(),
            };
            Ok((all.len() - rest.len(), frame))
        })?;
        *numbered = number;
        Ok(frame)
    }

    fn next_pcapng(
        &mut self,
        parser: &mut PcapNgParser,
        numbered: &mut u64,
    ) -> Result<Option<Frame>, CaptureErrorKind> {
        loop {
            let offset = self.offset();
            // Checks the block's framing; keeps the section's byte order and interfaces.
            let block = self.next_with(&|| "pcapng block".to_owned(), |r| {
                let all = r.pending();
                let (rest, block) = parser.next_raw_block(all)?;
                Ok((
                    all.len() - rest.len(),
                    (block.type_, block.body.into_owned()),
                ))
            })?;
            let Some((type_, body)) = block else {
                return Ok(None);
            };
            if PCAPNG_NUMBERED_NON_PACKETS.contains(&type_) {
                *numbered += 1;
                continue;
            }
            if let Some((frame, speed)) = packet_frame(parser, type_, &body, *numbered + 1, offset)?
            {
                *numbered = frame.number;
                self.link_speed_bps = speed;
                return Ok(Some(frame));
            }
        }
    }
}

impl<R: Read> Iterator for FrameReader<R> {
    type Item = Result<Frame, CaptureErrorKind>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.next_frame().transpose();
        self.done = !matches!(item, Some(Ok(_)));
        item
    }
}

/// The frame of pcapng block `type_` with `body`, numbered `number`, if it
/// is a packet block, with its interface's `if_speed`.
fn packet_frame(
    parser: &PcapNgParser,
    type_: u32,
    body: &[u8],
    number: u64,
    offset: u64,
) -> Result<Option<(Frame, Option<u64>)>, CaptureErrorKind> {
    let malformed = |detail: &str| CaptureErrorKind::Malformed {
        what: format!("pcapng packet block (frame {number})"),
        offset,
        detail: detail.to_owned(),
    };
    let Some(packet) =
        decode_packet_block(type_, body, parser.section().endianness).map_err(malformed)?
    else {
        return Ok(None);
    };
    let interface = parser
        .interfaces()
        .get(packet.interface_id as usize)
        .map(Interface::new)
        .ok_or(CaptureErrorKind::UnknownInterface {
            interface_id: packet.interface_id,
            offset,
        })?;
    let link = link_from_number(interface.linktype)
        .ok_or(CaptureErrorKind::UnsupportedLinkType(interface.linktype))?;
    let (timestamp, data) = match packet.ticks {
        Some(ticks) => (interface.timestamp(ticks), packet.data),
        None => {
            // Simple Packet Block: captured length = min(orig_len, snaplen); the rest is
            // block padding. A snaplen of 0 means no limit.
            let mut len = packet.data.len().min(packet.orig_len as usize);
            if interface.snaplen != 0 {
                len = len.min(interface.snaplen as usize);
            }
            (Duration::ZERO, &packet.data[..len])
        }
    };
    let frame = Frame {
        number,
        timestamp,
        orig_len: packet.orig_len,
        link,
        data: data.to_vec(),
    };
    Ok(Some((frame, interface.speed_bps)))
}

/// What a packet block needs from its interface's description.
struct Interface {
    linktype: u32,
    snaplen: u32,
    tsresol: u8,
    tsoffset: i64,
    /// `if_speed`, bit/s.
    speed_bps: Option<u64>,
}

impl Interface {
    fn new(idb: &InterfaceDescriptionBlock<'_>) -> Self {
        let mut interface = Self {
            linktype: u32::from(idb.linktype),
            snaplen: idb.snaplen,
            tsresol: 6,
            tsoffset: 0,
            speed_bps: None,
        };
        for option in &idb.options {
            match option {
                InterfaceDescriptionOption::IfTsResol(r) => interface.tsresol = *r,
                InterfaceDescriptionOption::IfSpeed(bps) => interface.speed_bps = Some(*bps),
                // A signed number of seconds (pcap-file reads it as u64).
                InterfaceDescriptionOption::IfTsOffset(o) => {
                    interface.tsoffset = i64::from_ne_bytes(o.to_ne_bytes());
                }
                _ => {}
            }
        }
        interface
    }

    /// Converts a packet block's tick count to time since the epoch, truncating to whole
    /// nanoseconds as Wireshark does.
    fn timestamp(&self, ticks: u64) -> Duration {
        let ticks = u128::from(ticks);
        let exponent = u32::from(self.tsresol & 0x7F);
        let nanos = if self.tsresol & 0x80 != 0 {
            (ticks * 1_000_000_000) >> exponent // 2^-exponent s; exponent <= 127
        } else if exponent <= 9 {
            ticks * 10u128.pow(9 - exponent)
        } else if exponent <= 38 {
            ticks / 10u128.pow(exponent - 9)
        } else {
            0 // 10^exponent > u128::MAX > ticks * 10^9
        };
        // nanos / 10^9 <= ticks, so the seconds fit in a u64.
        let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
        let since_epoch = Duration::new(secs, (nanos % 1_000_000_000) as u32);
        let offset = Duration::from_secs(self.tsoffset.unsigned_abs());
        if self.tsoffset >= 0 {
            since_epoch.saturating_add(offset)
        } else {
            since_epoch.saturating_sub(offset)
        }
    }
}

/// The fixed fields of an Enhanced, Simple or obsolete Packet Block.
struct PacketBlock<'a> {
    interface_id: u32,
    /// `None` for a Simple Packet Block, which has no timestamp.
    ticks: Option<u64>,
    orig_len: u32,
    /// Captured bytes; for a Simple Packet Block, followed by the block padding.
    data: &'a [u8],
}

/// Decodes a packet block; `Ok(None)` for blocks that carry no packet.
fn decode_packet_block(
    type_: u32,
    body: &[u8],
    endianness: Endianness,
) -> Result<Option<PacketBlock<'_>>, &'static str> {
    let u16_at = |at: usize| {
        let b = [body[at], body[at + 1]];
        match endianness {
            Endianness::Big => u16::from_be_bytes(b),
            Endianness::Little => u16::from_le_bytes(b),
        }
    };
    let u32_at = |at: usize| {
        let b = [body[at], body[at + 1], body[at + 2], body[at + 3]];
        match endianness {
            Endianness::Big => u32::from_be_bytes(b),
            Endianness::Little => u32::from_le_bytes(b),
        }
    };
    let ticks_at = |at: usize| (u64::from(u32_at(at)) << 32) | u64::from(u32_at(at + 4));
    let captured = |header_len: usize, captured_len: u32| {
        body.get(header_len..)
            .and_then(|d| d.get(..captured_len as usize))
            .ok_or("its captured length runs past the end of the block")
    };
    let packet = match type_ {
        PCAPNG_ENHANCED_PACKET_BLOCK => {
            if body.len() < 20 {
                return Err("an Enhanced Packet Block body is shorter than 20 bytes");
            }
            PacketBlock {
                interface_id: u32_at(0),
                ticks: Some(ticks_at(4)),
                orig_len: u32_at(16),
                data: captured(20, u32_at(12))?,
            }
        }
        PCAPNG_SIMPLE_PACKET_BLOCK => {
            if body.len() < 4 {
                return Err("a Simple Packet Block body is shorter than 4 bytes");
            }
            PacketBlock {
                interface_id: 0,
                ticks: None,
                orig_len: u32_at(0),
                data: &body[4..],
            }
        }
        PCAPNG_PACKET_BLOCK => {
            if body.len() < 20 {
                return Err("a Packet Block body is shorter than 20 bytes");
            }
            PacketBlock {
                interface_id: u32::from(u16_at(0)),
                ticks: Some(ticks_at(4)),
                orig_len: u32_at(16),
                data: captured(20, u32_at(12))?,
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(packet))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A little-endian microsecond pcap header for Ethernet.
    fn pcap_header() -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        for field in [0u32, 0, 0x7fff_ffff, 1] {
            h.extend_from_slice(&field.to_le_bytes()); // zone, sigfigs, snaplen, link
        }
        h
    }

    #[test]
    fn an_endless_record_in_a_long_stream_is_malformed_not_buffered() {
        let mut bytes = pcap_header();
        for field in [0u32, 0, 0x7fff_ffff, 0x7fff_ffff] {
            bytes.extend_from_slice(&field.to_le_bytes()); // ts, frac, caplen, len
        }
        bytes.resize(bytes.len() + MAX_RECORD + 2 * CHUNK, 0);
        let mut r = FrameReader::new(&bytes[..]);
        match r.next() {
            Some(Err(CaptureErrorKind::Malformed { offset, detail, .. })) => {
                assert_eq!(offset, 24);
                assert!(detail.contains("longer than"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        assert!(r.next().is_none(), "an error ends the iteration");
        // The same record cut short by the end of the input is truncated.
        let short = &bytes[..24 + 16 + 100];
        assert!(matches!(
            FrameReader::new(short).next(),
            Some(Err(CaptureErrorKind::Truncated { offset: 24, .. }))
        ));
    }
}
