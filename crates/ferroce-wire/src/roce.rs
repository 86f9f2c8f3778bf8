//! Whole RoCE frames: finding the RoCE packet in a captured frame, parsing it
//! with every check, verifying its ICRC, and emitting one.
//!
//! A frame is RoCE when it is Ethertype 0x8915 (v1), or IPv4/IPv6 carrying UDP
//! to port 4791 (v2) with enough bytes to see that. [`locate`] answers that
//! question and nothing more, so that a malformed RoCE packet is still known
//! to be RoCE; [`Located::parse`] then applies every check and fails with the
//! first error found, in wire order.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::ethernet::{self, EthernetRepr};
use crate::icrc::{self, IcrcScope};
use crate::ipv4::{self, Ipv4Repr};
use crate::ipv6::{self, Ipv6Repr};
use crate::transport::{ICRC_LEN, TransportPacket, TransportRepr};
use crate::udp::{self, UdpRepr};
use crate::{Error, Header, Result};

/// How a captured frame begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// Ethernet II (pcap link type 1).
    Ethernet,
    /// Linux cooked capture v1, 16-byte header (113).
    LinuxSll,
    /// Linux cooked capture v2, 20-byte header (276).
    LinuxSll2,
    /// A bare IPv4 or IPv6 packet (101, 228, 229).
    RawIp,
}

/// The RoCE encapsulation of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RoceVersion {
    /// Ethertype 0x8915, GRH, transport.
    V1,
    /// IPv4, UDP to 4791, transport.
    V2Ipv4,
    /// IPv6, UDP to 4791, transport.
    V2Ipv6,
}

impl RoceVersion {
    /// `"v1"`, `"v2-ipv4"` or `"v2-ipv6"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::V1 => "v1",
            Self::V2Ipv4 => "v2-ipv4",
            Self::V2Ipv6 => "v2-ipv6",
        }
    }

    const fn icrc_scope(self) -> IcrcScope {
        match self {
            Self::V1 => IcrcScope::RoceV1,
            Self::V2Ipv4 => IcrcScope::RoceV2Ipv4,
            Self::V2Ipv6 => IcrcScope::RoceV2Ipv6,
        }
    }
}

/// A frame known to be RoCE, not yet checked further.
#[derive(Debug, Clone, Copy)]
pub struct Located<'a> {
    /// The RoCE encapsulation found.
    pub version: RoceVersion,
    /// The Ethernet header, when the link type has one.
    pub ethernet: Option<EthernetRepr>,
    /// From the GRH or IP header to the end of the captured frame.
    pub l3: &'a [u8],
}

/// The pre-802.1ad QinQ outer tag some switches still send.
const ETHERTYPE_QINQ_OLD: u16 = 0x9100;
/// Linux cooked capture v1: a 16-byte header, the protocol in its last 2.
const SLL_HEADER_LEN: usize = 16;
const SLL_PROTOCOL: core::ops::Range<usize> = 14..16;
/// Linux cooked capture v2: a 20-byte header, the protocol in its first 2.
const SLL2_HEADER_LEN: usize = 20;
const SLL2_PROTOCOL: core::ops::Range<usize> = 0..2;

/// Finds the RoCE packet in `frame`, or `None` if the frame is not RoCE.
#[inline]
pub fn locate(link: LinkType, frame: &[u8]) -> Option<Located<'_>> {
    let (ethernet, ethertype, off) = match link {
        LinkType::Ethernet => {
            let (mut eth, mut off) = EthernetRepr::parse(frame).ok()?;
            // Step over any further (QinQ) tags; the repr keeps the outer one.
            while matches!(
                eth.ethertype,
                ethernet::ETHERTYPE_VLAN | ethernet::ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD
            ) && frame.len() >= off + ethernet::VLAN_LEN
            {
                // A tag is TCI then the next ethertype.
                eth.ethertype = u16::from_be_bytes([frame[off + 2], frame[off + 3]]);
                off += ethernet::VLAN_LEN;
            }
            (Some(eth), eth.ethertype, off)
        }
        LinkType::LinuxSll => {
            let b = frame.get(SLL_PROTOCOL)?;
            (None, u16::from_be_bytes([b[0], b[1]]), SLL_HEADER_LEN)
        }
        LinkType::LinuxSll2 => {
            let b = frame.get(SLL2_PROTOCOL)?;
            if frame.len() < SLL2_HEADER_LEN {
                return None;
            }
            (None, u16::from_be_bytes([b[0], b[1]]), SLL2_HEADER_LEN)
        }
        LinkType::RawIp => match frame.first()? >> 4 {
            4 => (None, ethernet::ETHERTYPE_IPV4, 0),
            6 => (None, ethernet::ETHERTYPE_IPV6, 0),
            _ => return None,
        },
    };
    let l3 = &frame[off..];
    let version = match ethertype {
        ethernet::ETHERTYPE_ROCE_V1 => RoceVersion::V1,
        ethernet::ETHERTYPE_IPV4 => {
            let ihl = usize::from(*l3.first()? & 0xf) * 4;
            let dst_port = ihl + udp::field::DST_PORT.start;
            let ok = l3.len() >= ipv4::MIN_HEADER_LEN
                && l3[0] >> 4 == ipv4::VERSION
                && ihl >= ipv4::MIN_HEADER_LEN
                && l3.len() >= ihl + udp::HEADER_LEN
                && l3[ipv4::field::PROTOCOL] == ipv4::PROTO_UDP
                && u16::from_be_bytes([l3[dst_port], l3[dst_port + 1]]) == udp::ROCE_V2_PORT;
            if !ok {
                return None;
            }
            RoceVersion::V2Ipv4
        }
        ethernet::ETHERTYPE_IPV6 => {
            let ok = l3.len() >= 48
                && l3[6] == ipv4::PROTO_UDP
                && u16::from_be_bytes([l3[42], l3[43]]) == udp::ROCE_V2_PORT;
            if !ok {
                return None;
            }
            RoceVersion::V2Ipv6
        }
        _ => return None,
    };
    Some(Located {
        version,
        ethernet,
        l3,
    })
}

/// The network headers of a RoCE packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// RoCE v1: a GRH after the Ethernet header.
    V1 {
        /// The GRH (IBA 8.3), laid out as an IPv6 header.
        grh: Ipv6Repr,
    },
    /// RoCE v2 over IPv4.
    V2Ipv4 {
        /// The IPv4 header.
        ip: Ipv4Repr,
        /// The UDP header (destination port 4791).
        udp: UdpRepr,
    },
    /// RoCE v2 over IPv6.
    V2Ipv6 {
        /// The IPv6 header.
        ip: Ipv6Repr,
        /// The UDP header (destination port 4791).
        udp: UdpRepr,
    },
}

impl Network {
    /// The RoCE encapsulation these headers make.
    pub fn version(&self) -> RoceVersion {
        match self {
            Self::V1 { .. } => RoceVersion::V1,
            Self::V2Ipv4 { .. } => RoceVersion::V2Ipv4,
            Self::V2Ipv6 { .. } => RoceVersion::V2Ipv6,
        }
    }

    /// Bytes of the network headers (GRH, or IP + UDP).
    pub fn header_len(&self) -> usize {
        match self {
            Self::V1 { .. } => ipv6::HEADER_LEN,
            Self::V2Ipv4 { ip, .. } => usize::from(ip.header_len) + udp::HEADER_LEN,
            Self::V2Ipv6 { .. } => ipv6::HEADER_LEN + udp::HEADER_LEN,
        }
    }

    /// The UDP header of a v2 packet.
    pub fn udp(&self) -> Option<&UdpRepr> {
        match self {
            Self::V1 { .. } => None,
            Self::V2Ipv4 { udp, .. } | Self::V2Ipv6 { udp, .. } => Some(udp),
        }
    }
}

/// A parsed, structurally valid RoCE packet. The ICRC is not judged by
/// parsing: ask [`RoceFrame::verify_icrc`].
#[derive(Debug, Clone, Copy)]
pub struct RoceFrame<'a> {
    /// The Ethernet header (outer VLAN tag kept), if the link type has one.
    pub ethernet: Option<EthernetRepr>,
    /// The GRH, or the IP and UDP headers.
    pub network: Network,
    /// The transport part: BTH through ICRC.
    pub transport: TransportPacket<&'a [u8]>,
    /// GRH/IP header through the ICRC: what the ICRC covers.
    covered: &'a [u8],
}

impl<'a> Located<'a> {
    /// Applies every check; the first failure is returned.
    #[inline]
    pub fn parse(self) -> Result<RoceFrame<'a>> {
        let (network, transport_range) = self.network()?;
        let covered = &self.l3[..transport_range.end];
        let transport = TransportPacket::new_checked(&self.l3[transport_range])?;
        Ok(RoceFrame {
            ethernet: self.ethernet,
            network,
            transport,
            covered,
        })
    }

    /// The receive fast path: every check of [`parse`](Self::parse) plus the
    /// ICRC, returning only the transport (BTH through ICRC), which is all
    /// a queue pair needs. Builds no header values, so it stays cheap.
    #[inline]
    pub fn parse_transport_verified(self) -> Result<TransportPacket<&'a [u8]>> {
        let (_, transport_range) = self.network()?;
        let covered = &self.l3[..transport_range.end];
        let start = transport_range.start;
        let transport = TransportPacket::new_checked(&self.l3[transport_range])?;
        let computed = icrc::compute_roce(self.version.icrc_scope(), start, covered);
        let received = transport.icrc();
        if computed != received {
            return Err(Error::BadIcrc { computed, received });
        }
        Ok(transport)
    }

    /// Checks and decodes the network headers; returns them and where the
    /// transport lies in `l3`.
    #[inline(always)]
    fn network(&self) -> Result<(Network, core::ops::Range<usize>)> {
        let l3 = self.l3;
        let (network, transport_range) = match self.version {
            RoceVersion::V1 => {
                let grh = Ipv6Repr::parse_grh(l3)?;
                let avail = l3.len() - ipv6::HEADER_LEN;
                if usize::from(grh.payload_len) != avail {
                    return Err(Error::BadLength {
                        field: "grh.paylen",
                        claimed: grh.payload_len.into(),
                        actual: avail,
                    });
                }
                (Network::V1 { grh }, ipv6::HEADER_LEN..l3.len())
            }
            RoceVersion::V2Ipv4 => {
                let ip = Ipv4Repr::parse(l3)?;
                if ip.is_fragment() {
                    return Err(Error::Fragmented);
                }
                let ihl = usize::from(ip.header_len);
                let total = usize::from(ip.total_len);
                let (udp, range) = v2_udp(l3, ihl, total.checked_sub(ihl), total, Header::Ipv4)?;
                (Network::V2Ipv4 { ip, udp }, range)
            }
            RoceVersion::V2Ipv6 => {
                let ip = Ipv6Repr::parse(l3)?;
                let plen = usize::from(ip.payload_len);
                let (udp, range) = v2_udp(
                    l3,
                    ipv6::HEADER_LEN,
                    Some(plen),
                    ipv6::HEADER_LEN + plen,
                    Header::Ipv6,
                )?;
                (Network::V2Ipv6 { ip, udp }, range)
            }
        };
        Ok((network, transport_range))
    }

    /// Where the BTH would start, for best-effort display of a packet that
    /// failed [`parse`](Self::parse).
    pub fn transport_guess(&self) -> &'a [u8] {
        let start = match self.version {
            RoceVersion::V1 => ipv6::HEADER_LEN,
            RoceVersion::V2Ipv4 => usize::from(self.l3[0] & 0xf) * 4 + udp::HEADER_LEN,
            RoceVersion::V2Ipv6 => ipv6::HEADER_LEN + udp::HEADER_LEN,
        };
        self.l3.get(start..).unwrap_or(&[])
    }
}

/// Checks the IP and UDP lengths of a v2 packet and returns the UDP header
/// and the range of the transport within `l3`.
#[inline]
fn v2_udp(
    l3: &[u8],
    udp_off: usize,
    ip_payload: Option<usize>,
    ip_end: usize,
    ip_header: Header,
) -> Result<(UdpRepr, core::ops::Range<usize>)> {
    if ip_end > l3.len() {
        return Err(Error::Truncated {
            header: ip_header,
            needed: ip_end,
            available: l3.len(),
        });
    }
    let udp = UdpRepr::parse(&l3[udp_off..])?;
    let ulen = usize::from(udp.length);
    if ip_payload != Some(ulen) || ulen < udp::HEADER_LEN {
        return Err(Error::BadLength {
            field: "udp.length",
            claimed: ulen,
            actual: ip_payload.unwrap_or(0),
        });
    }
    Ok((udp, udp_off + udp::HEADER_LEN..udp_off + ulen))
}

impl RoceFrame<'_> {
    /// The RoCE encapsulation of this packet.
    pub fn version(&self) -> RoceVersion {
        self.network.version()
    }

    /// The ICRC value this packet should carry.
    #[inline]
    pub fn computed_icrc(&self) -> u32 {
        // `parse` checked that the covered bytes hold every header the
        // scope masks, so this cannot fail; fall back to a value that never
        // matches rather than panic.
        icrc::compute(self.version().icrc_scope(), self.covered).unwrap_or(!self.transport.icrc())
    }

    /// Whether the ICRC matches.
    #[inline]
    pub fn icrc_ok(&self) -> bool {
        self.computed_icrc() == self.transport.icrc()
    }

    /// `Err(BadIcrc)` unless the ICRC matches.
    #[inline]
    pub fn verify_icrc(&self) -> Result<()> {
        let computed = self.computed_icrc();
        let received = self.transport.icrc();
        if computed == received {
            Ok(())
        } else {
            Err(Error::BadIcrc { computed, received })
        }
    }
}

/// A whole RoCE packet as values, for emitting (and for round-trip tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceRepr {
    /// The Ethernet header, or `None` to emit from the IP header / GRH on.
    pub ethernet: Option<EthernetRepr>,
    /// The GRH, or the IP and UDP headers.
    pub network: Network,
    /// The transport headers and payload length.
    pub transport: TransportRepr,
}

impl RoceRepr {
    /// Parses a RoCE frame into values (ICRC not judged).
    pub fn parse(frame: &RoceFrame<'_>) -> Result<Self> {
        Ok(Self {
            ethernet: frame.ethernet,
            network: frame.network,
            transport: TransportRepr::parse(&frame.transport)?,
        })
    }

    /// A RoCE v2 over IPv4 packet with the fields rxe uses: DF set, TTL 64,
    /// UDP checksum 0. The caller supplies the Identification and the UDP
    /// source port (see [`udp::source_port_from_flow_label`]).
    pub fn v2_ipv4(
        src: Ipv4Addr,
        dst: Ipv4Addr,
        ident: u16,
        src_port: u16,
        transport: TransportRepr,
    ) -> Self {
        let ip = Ipv4Repr {
            header_len: ipv4::MIN_HEADER_LEN as u8,
            dscp: 0,
            ecn: 0,
            total_len: 0,
            ident,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
            ttl: 64,
            protocol: ipv4::PROTO_UDP,
            checksum: 0,
            src,
            dst,
        };
        let mut r = Self {
            ethernet: None,
            network: Network::V2Ipv4 {
                ip,
                udp: UdpRepr {
                    src_port,
                    dst_port: udp::ROCE_V2_PORT,
                    length: 0,
                    checksum: 0,
                },
            },
            transport,
        };
        r.fill_lengths();
        r
    }

    /// A RoCE v2 over IPv6 packet: hop limit 64, flow label as given, UDP
    /// checksum 0 (as rxe sends it).
    pub fn v2_ipv6(
        src: Ipv6Addr,
        dst: Ipv6Addr,
        flow_label: u32,
        src_port: u16,
        transport: TransportRepr,
    ) -> Self {
        let mut r = Self {
            ethernet: None,
            network: Network::V2Ipv6 {
                ip: Ipv6Repr {
                    traffic_class: 0,
                    flow_label,
                    payload_len: 0,
                    next_header: ipv4::PROTO_UDP,
                    hop_limit: 64,
                    src,
                    dst,
                },
                udp: UdpRepr {
                    src_port,
                    dst_port: udp::ROCE_V2_PORT,
                    length: 0,
                    checksum: 0,
                },
            },
            transport,
        };
        r.fill_lengths();
        r
    }

    /// Bytes from the first header to the ICRC inclusive (Ethernet included
    /// when present).
    pub fn buffer_len(&self) -> usize {
        // `emit` writes an option-less IPv4 header whatever `header_len` says.
        let network = match self.network {
            Network::V2Ipv4 { .. } => ipv4::MIN_HEADER_LEN + udp::HEADER_LEN,
            n => n.header_len(),
        };
        self.ethernet.map_or(0, |e| e.header_len()) + network + self.transport.buffer_len()
    }

    /// Sets every length field, the ethertype and the IPv4 header checksum
    /// from the headers and the payload length, as `emit` writes them.
    pub fn fill_lengths(&mut self) {
        let tlen = self.transport.buffer_len();
        match &mut self.network {
            Network::V1 { grh } => {
                grh.payload_len = tlen.min(0xffff) as u16;
                grh.next_header = ipv6::NEXT_HEADER_IBA;
            }
            Network::V2Ipv4 { ip, udp } => {
                ip.header_len = ipv4::MIN_HEADER_LEN as u8;
                udp.length = (udp::HEADER_LEN + tlen).min(0xffff) as u16;
                ip.total_len = udp.length.saturating_add(ipv4::MIN_HEADER_LEN as u16);
                let mut h = [0u8; ipv4::MIN_HEADER_LEN];
                // An option-less header always fits.
                if ip.emit(&mut h).is_ok() {
                    ip.checksum = u16::from_be_bytes([
                        h[ipv4::field::CHECKSUM.start],
                        h[ipv4::field::CHECKSUM.start + 1],
                    ]);
                }
            }
            Network::V2Ipv6 { ip, udp } => {
                udp.length = (udp::HEADER_LEN + tlen).min(0xffff) as u16;
                ip.payload_len = udp.length;
            }
        }
        if let Some(eth) = &mut self.ethernet {
            eth.ethertype = match self.network {
                Network::V1 { .. } => ethernet::ETHERTYPE_ROCE_V1,
                Network::V2Ipv4 { .. } => ethernet::ETHERTYPE_IPV4,
                Network::V2Ipv6 { .. } => ethernet::ETHERTYPE_IPV6,
            };
        }
    }

    /// Writes the whole packet, ICRC included, into `buf`; returns its
    /// length. Length fields, the ethertype and the IPv4 checksum are
    /// computed (see [`fill_lengths`](Self::fill_lengths)); a packet bigger
    /// than the 16-bit length fields allow is refused.
    pub fn emit(&self, buf: &mut [u8], payload: &[u8]) -> Result<usize> {
        let len = self.buffer_len();
        let l3_len = len - self.ethernet.map_or(0, |e| e.header_len());
        // The largest 16-bit length field: IPv4 total length, or the
        // IPv6/GRH payload length (which excludes the 40-byte header).
        let (field, value) = match self.network {
            Network::V2Ipv4 { .. } => ("ipv4.total_len", l3_len),
            Network::V2Ipv6 { .. } => ("ipv6.payload_len", l3_len - ipv6::HEADER_LEN),
            Network::V1 { .. } => ("grh.paylen", l3_len - ipv6::HEADER_LEN),
        };
        if value > 0xffff {
            return Err(Error::FieldOverflow {
                field,
                value: value as u64,
            });
        }
        if buf.len() < len {
            return Err(Error::BufferTooSmall {
                needed: len,
                available: buf.len(),
            });
        }
        let mut r = *self;
        r.fill_lengths();
        let mut off = match r.ethernet {
            Some(eth) => eth.emit(buf)?,
            None => 0,
        };
        let l3_start = off;
        match r.network {
            Network::V1 { grh } => grh.emit(&mut buf[off..])?,
            Network::V2Ipv4 { ip, udp } => {
                ip.emit(&mut buf[off..])?;
                udp.emit(&mut buf[off + ipv4::MIN_HEADER_LEN..])?;
            }
            Network::V2Ipv6 { ip, udp } => {
                ip.emit(&mut buf[off..])?;
                udp.emit(&mut buf[off + ipv6::HEADER_LEN..])?;
            }
        }
        off += r.network.header_len();
        let tlen = r.transport.emit(&mut buf[off..], payload)?;
        let end = off + tlen;
        let scope = r.network.version().icrc_scope();
        let value = icrc::compute(scope, &buf[l3_start..end])?;
        buf[end - ICRC_LEN..end].copy_from_slice(&value.to_le_bytes());
        Ok(end)
    }
}
