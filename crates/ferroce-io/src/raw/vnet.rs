//! Segmentation offload for RoCE v2 on the raw backend: the virtio-net
//! header (`struct virtio_net_hdr`) that a packet socket with
//! `PACKET_VNET_HDR` reads before each frame it sends and writes before
//! each frame it receives, and the splitting of received super-frames.
//!
//! Sending: a train of RoCE v2 packets of one flow (same headers but the
//! PSN, each BTH..ICRC `gso_size` bytes, the last possibly shorter) goes
//! down as one super-frame, marked `GSO_UDP_L4`, which the kernel (or the
//! NIC) cuts into real frames ([`crate::raw::frame::FrameBuilder::build_train`]
//! builds it). The kernel insists on `NEEDS_CSUM` with the checksum at the
//! UDP header (Linux's `virtio_net_hdr_to_skb`), so segments leave with a
//! real UDP checksum instead of rxe's 0; the ICRC masks that field either
//! way. Segment `i` carries the IPv4 Identification of the super-frame
//! plus `i` and its own lengths (Linux's `inet_gso_segment` and
//! `__udp_gso_segment`), so each packet's ICRC is computed over exactly
//! that header. RoCE v1 has no UDP header: the kernel cannot segment it,
//! and v1 packets always go one frame each.
//!
//! Receiving: a veth (or any software device) hands a super-frame through
//! whole, with its GSO marks, and the kernel's GRO merges received trains
//! into one (for a UDP socket that takes them, as the backend's port hold
//! does). [`split`] cuts it as the kernel would have: one frame per
//! `gso_size` piece, each with the header the kernel would have given it,
//! which the caller then checks in full (ICRC included) like any frame.
//! GRO keeps only the first packet's IPv4 header and merges both trains
//! whose Identifications count up and trains with one fixed Identification
//! (Linux gives 0 to every DF packet of an unconnected socket), without
//! saying which: the second segment is tried both ways, and the way whose
//! ICRC checks is kept for the rest. (GRO takes only packets with a UDP
//! checksum, so rxe's, with 0, are never merged.) The header's fields are input like any other: a
//! super-frame whose header lies (a type other than UDP, no segment size,
//! more than 64 segments, not RoCE v2) is refused.

use ferroce_wire::ethernet::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, EthernetRepr};
use ferroce_wire::ipv4::{self, Ipv4Repr};
use ferroce_wire::ipv6::{self, Ipv6Repr};
use ferroce_wire::udp::{self, UdpRepr};
use std::ops::Range;

/// Bytes of `struct virtio_net_hdr` (without `num_buffers`: packet
/// sockets use the 10-byte form).
pub const VNET_HDR_LEN: usize = 10;
/// The checksum is to be filled in from `csum_start` (`csum_offset` on).
const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
/// UDP segmentation (`VIRTIO_NET_HDR_GSO_UDP_L4`, Linux 4.18+).
const GSO_UDP_L4: u8 = 5;
/// Offset of the checksum in a UDP header.
const UDP_CHECKSUM_AT: u16 = 6;
/// Most segments in one super-frame (the kernel's `UDP_MAX_SEGMENTS`).
pub const MAX_SEGMENTS: usize = 64;

/// A virtio-net header. Packet sockets use the host's byte order for its
/// 16-bit fields (`vio_le()`: little-endian on every host Linux runs
/// RoCE on, native byte order in general).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    /// Bytes of headers (Ethernet through UDP) before the payload.
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    /// The header of a train: `headers` bytes of Ethernet, IP and UDP,
    /// then payloads of `segment` bytes each (the last may be shorter).
    pub fn udp_train(headers: usize, segment: usize) -> Self {
        Self {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_UDP_L4,
            hdr_len: headers as u16,
            gso_size: segment as u16,
            csum_start: (headers - udp::HEADER_LEN) as u16,
            csum_offset: UDP_CHECKSUM_AT,
        }
    }

    /// Whether the frame after it is a super-frame to cut.
    pub fn is_gso(&self) -> bool {
        self.gso_type != GSO_NONE
    }

    pub fn emit(&self, b: &mut [u8; VNET_HDR_LEN]) {
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
    }

    pub fn parse(b: &[u8; VNET_HDR_LEN]) -> Self {
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Self {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        }
    }
}

/// Why a super-frame was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadGso {
    /// A GSO type other than UDP (TCP, UDP fragmentation, ECN).
    Type(u8),
    /// A segment size of 0.
    NoSegmentSize,
    /// Not Ethernet + IPv4/IPv6 (no options) + UDP, or cut short.
    NotRoceV2,
    /// More than [`MAX_SEGMENTS`] pieces.
    TooManySegments(usize),
}

/// The network header of a super-frame, to be rewritten per segment.
enum Ip {
    V4(Ipv4Repr),
    V6(Ipv6Repr),
}

/// Most bytes of headers before a super-frame's payload (Ethernet with an
/// 802.1Q tag, IPv6, UDP).
const MAX_HEADERS: usize = 18 + ipv6::HEADER_LEN + udp::HEADER_LEN;

/// A super-frame's headers: where each starts and what it says.
struct Layout {
    /// The Ethernet header as it came (every segment's is the same).
    eth: [u8; MAX_HEADERS],
    l3_at: usize,
    udp_at: usize,
    payload_at: usize,
    ip: Ip,
    udp: UdpRepr,
}

impl Layout {
    /// Parses the headers: Ethernet, IPv4 without options or IPv6, UDP.
    fn parse(frame: &[u8]) -> Result<Self, BadGso> {
        let (eth, l3_at) = EthernetRepr::parse(frame).map_err(|_| BadGso::NotRoceV2)?;
        let l3 = &frame[l3_at..];
        let (ip, ip_len) = match eth.ethertype {
            ETHERTYPE_IPV4 => {
                let ip = Ipv4Repr::parse(l3).map_err(|_| BadGso::NotRoceV2)?;
                let plain = usize::from(ip.header_len) == ipv4::MIN_HEADER_LEN;
                if !plain || ip.protocol != ipv4::PROTO_UDP {
                    return Err(BadGso::NotRoceV2);
                }
                (Ip::V4(ip), ipv4::MIN_HEADER_LEN)
            }
            ETHERTYPE_IPV6 => {
                let ip = Ipv6Repr::parse(l3).map_err(|_| BadGso::NotRoceV2)?;
                if ip.next_header != ipv4::PROTO_UDP {
                    return Err(BadGso::NotRoceV2);
                }
                (Ip::V6(ip), ipv6::HEADER_LEN)
            }
            _ => return Err(BadGso::NotRoceV2),
        };
        let udp_at = l3_at + ip_len;
        let payload_at = udp_at + udp::HEADER_LEN;
        let udp = frame
            .get(udp_at..payload_at)
            .and_then(|h| UdpRepr::parse(h).ok())
            .ok_or(BadGso::NotRoceV2)?;
        let mut copy = [0u8; MAX_HEADERS];
        copy[..l3_at].copy_from_slice(&frame[..l3_at]);
        Ok(Self {
            eth: copy,
            l3_at,
            udp_at,
            payload_at,
            ip,
            udp,
        })
    }

    /// Writes the headers of segment `i` (`len` payload bytes, starting
    /// `i * size` into the payload), IPv4 Identifications `step` apart,
    /// just before its payload; returns the segment's range in `frame`.
    fn cut(
        &self,
        frame: &mut [u8],
        (i, size, len): (usize, usize, usize),
        step: u16,
    ) -> Result<Range<usize>, BadGso> {
        let at = i * size;
        let head = &mut frame[at..at + self.payload_at];
        head[..self.l3_at].copy_from_slice(&self.eth[..self.l3_at]);
        let ulen = (udp::HEADER_LEN + len) as u16;
        let emitted = match &self.ip {
            Ip::V4(h) => Ipv4Repr {
                total_len: ulen + ipv4::MIN_HEADER_LEN as u16,
                ident: h.ident.wrapping_add((i as u16).wrapping_mul(step)),
                ..*h
            }
            .emit(&mut head[self.l3_at..]),
            Ip::V6(h) => Ipv6Repr {
                payload_len: ulen,
                ..*h
            }
            .emit(&mut head[self.l3_at..]),
        };
        let udp = UdpRepr {
            length: ulen,
            ..self.udp
        };
        emitted
            .and_then(|()| udp.emit(&mut head[self.udp_at..]))
            .map_err(|_| BadGso::NotRoceV2)?;
        Ok(at..at + self.payload_at + len)
    }
}

/// Cuts the super-frame `frame` marked by `vnet` into the frames the kernel
/// would have made of it, in place, and hands each to `f` (in order);
/// returns the number of segments. Segment `i`'s headers are written just
/// before its payload, over the tail of segment `i - 1`, which `f` is done
/// with: no payload is copied. Only the headers' lengths (and IPv4's
/// Identification: the super-frame's plus the segment's index, or the
/// super-frame's in every segment) change; the checks of each frame, ICRC
/// included, are `f`'s. While the Identifications' way is not known, `f`
/// is told the frame is a guess (`true`) and returns whether its ICRC
/// checked; the other way is then tried, not a guess.
pub fn split(
    vnet: &VnetHdr,
    frame: &mut [u8],
    mut f: impl FnMut(&[u8], bool) -> bool,
) -> Result<usize, BadGso> {
    if vnet.gso_type != GSO_UDP_L4 {
        return Err(BadGso::Type(vnet.gso_type));
    }
    let size = usize::from(vnet.gso_size);
    if size == 0 {
        return Err(BadGso::NoSegmentSize);
    }
    let layout = Layout::parse(frame)?;
    let total = frame.len() - layout.payload_at;
    let count = total.div_ceil(size);
    if count > MAX_SEGMENTS {
        return Err(BadGso::TooManySegments(count));
    }
    // Whether Identifications count up (`Some(1)`) or stay (`Some(0)`);
    // IPv6 has none, and one segment tells nothing.
    let mut step = match layout.ip {
        Ip::V4(_) => None,
        Ip::V6(_) => Some(1),
    };
    for i in 0..count {
        let seg = (i, size, size.min(total - i * size));
        let known = match step {
            Some(s) => Some(s),
            None if i == 0 => Some(0),
            None => None,
        };
        if let Some(s) = known {
            let r = layout.cut(frame, seg, s)?;
            f(&frame[r], false);
            continue;
        }
        let guess = layout.cut(frame, seg, 1)?;
        step = Some(if f(&frame[guess], true) {
            1
        } else {
            let other = layout.cut(frame, seg, 0)?;
            // A segment that checks neither way leaves the counting-up
            // rule, the kernel's own.
            if f(&frame[other], false) { 0 } else { 1 }
        });
    }
    Ok(count)
}

/// The one's-complement sum of the UDP pseudo-header (addresses, protocol,
/// `udp_len`), folded but not inverted: what a checksum offload expects in
/// the UDP checksum field beforehand (Linux's `~csum_tcpudp_magic`).
pub fn pseudo_header_sum(src: &[u8], dst: &[u8], udp_len: u32) -> u16 {
    let mut sum: u64 = 0;
    for pair in src.chunks(2).chain(dst.chunks(2)) {
        sum += u64::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
    }
    sum += u64::from(ipv4::PROTO_UDP);
    sum += u64::from(udp_len >> 16) + u64::from(udp_len & 0xffff);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
#[path = "vnet_tests.rs"]
mod tests;
