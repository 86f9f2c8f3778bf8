//! Whole Ethernet frames around RoCE transport bytes: built for sending
//! ([`FrameBuilder`]) and taken apart on receive ([`parse_rx`]), both
//! through ferroce-wire's header reprs and ICRC (no header layout is
//! written out here).
//!
//! On send the ICRC is computed over the IP header (or GRH) exactly as
//! emitted, so it is right whatever the Identification, TOS or flow label.
//! On receive every header is on hand, so the ICRC is checked in full,
//! IPv4 Identification included (the UDP backend cannot see it: see
//! [`crate::icrc`]).

use std::net::{Ipv4Addr, Ipv6Addr};

use ferroce_wire::ethernet::{EthernetRepr, VlanTag};
use ferroce_wire::icrc::{self, IcrcScope};
use ferroce_wire::ipv4::{self, Ipv4Repr};
use ferroce_wire::ipv6::{self, Ipv6Repr};
use ferroce_wire::pfc::{self, MacControlRepr};
use ferroce_wire::transport::{BTH_LEN, ICRC_LEN};
use ferroce_wire::udp::{self, UdpRepr};
use ferroce_wire::{Error, LinkType, Network, RoceVersion};

/// The smallest Ethernet frame without its FCS; shorter frames are padded
/// (a NIC would pad them; a veth does not).
pub const MIN_FRAME_LEN: usize = 60;

/// The network layer of a frame to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L3 {
    /// RoCE v2 over IPv4: DF set, Identification from the builder's
    /// counter, UDP checksum 0 (as rxe sends).
    V2Ipv4 {
        src: Ipv4Addr,
        dst: Ipv4Addr,
        /// DSCP (high 6 bits) and ECN (low 2).
        tos: u8,
        ttl: u8,
        src_port: u16,
    },
    /// RoCE v2 over IPv6, UDP checksum 0 (as rxe sends).
    V2Ipv6 {
        src: Ipv6Addr,
        dst: Ipv6Addr,
        traffic_class: u8,
        flow_label: u32,
        hop_limit: u8,
        src_port: u16,
    },
    /// RoCE v1: ethertype 0x8915, a GRH (source and destination GIDs).
    V1 {
        sgid: Ipv6Addr,
        dgid: Ipv6Addr,
        traffic_class: u8,
        flow_label: u32,
        hop_limit: u8,
    },
}

/// Everything about a frame but its transport bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSpec {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    /// An 802.1Q tag (its PCP is the priority PFC acts on), or none.
    pub vlan: Option<VlanTag>,
    pub l3: L3,
}

/// Builds frames; keeps the IPv4 Identification counter, as a host's IP
/// stack does (each datagram a new value, so a receiver never takes two
/// for fragments of one).
#[derive(Debug, Clone, Default)]
pub struct FrameBuilder {
    next_ident: u16,
}

impl FrameBuilder {
    /// A builder whose first IPv4 Identification is `first_ident`.
    pub fn new(first_ident: u16) -> Self {
        Self {
            next_ident: first_ident,
        }
    }

    /// Bytes of headers before the transport.
    pub fn header_len(spec: &FrameSpec) -> usize {
        let eth = EthernetRepr {
            dst: spec.dst_mac,
            src: spec.src_mac,
            vlan: spec.vlan,
            ethertype: 0,
        };
        eth.header_len()
            + match spec.l3 {
                L3::V2Ipv4 { .. } => ipv4::MIN_HEADER_LEN + udp::HEADER_LEN,
                L3::V2Ipv6 { .. } => ipv6::HEADER_LEN + udp::HEADER_LEN,
                L3::V1 { .. } => ipv6::HEADER_LEN,
            }
    }

    /// Writes the frame for `transport` (BTH through ICRC; its ICRC bytes
    /// are overwritten with the right value) into `out`; returns its length.
    pub fn build(
        &mut self,
        spec: &FrameSpec,
        transport: &[u8],
        out: &mut [u8],
    ) -> Result<usize, Error> {
        if transport.len() < BTH_LEN + ICRC_LEN {
            return Err(Error::Truncated {
                header: ferroce_wire::Header::Bth,
                needed: BTH_LEN + ICRC_LEN,
                available: transport.len(),
            });
        }
        let hlen = Self::header_len(spec);
        let end = hlen + transport.len();
        let len = end.max(MIN_FRAME_LEN);
        if out.len() < len {
            return Err(Error::BufferTooSmall {
                needed: len,
                available: out.len(),
            });
        }
        let (ethertype, scope) = match spec.l3 {
            L3::V2Ipv4 { .. } => (
                ferroce_wire::ethernet::ETHERTYPE_IPV4,
                IcrcScope::RoceV2Ipv4,
            ),
            L3::V2Ipv6 { .. } => (
                ferroce_wire::ethernet::ETHERTYPE_IPV6,
                IcrcScope::RoceV2Ipv6,
            ),
            L3::V1 { .. } => (ferroce_wire::ethernet::ETHERTYPE_ROCE_V1, IcrcScope::RoceV1),
        };
        let eth = EthernetRepr {
            dst: spec.dst_mac,
            src: spec.src_mac,
            vlan: spec.vlan,
            ethertype,
        };
        let l3_start = eth.emit(out)?;
        let ident = self.take_idents(&spec.l3, 1);
        emit_l3(&spec.l3, transport.len(), ident, &mut out[l3_start..])?;
        out[hlen..end].copy_from_slice(transport);
        let value = icrc::compute(scope, &out[l3_start..end])?;
        out[end - ICRC_LEN..end].copy_from_slice(&value.to_le_bytes());
        out[end..len].fill(0);
        Ok(len)
    }

    /// The IPv4 Identification of the next packet, `count` of them taken
    /// (0 for other network layers, which have none).
    fn take_idents(&mut self, l3: &L3, count: usize) -> u16 {
        let ident = self.next_ident;
        if let L3::V2Ipv4 { .. } = l3 {
            self.next_ident = ident.wrapping_add(count as u16);
        }
        ident
    }
}

/// Writes the network header (and UDP's, for v2) of a packet of `tlen`
/// transport bytes, with IPv4 Identification `ident`.
fn emit_l3(l3: &L3, tlen: usize, ident: u16, out: &mut [u8]) -> Result<(), Error> {
    let udp_len = |field| {
        u16::try_from(udp::HEADER_LEN + tlen).map_err(|_| Error::FieldOverflow {
            field,
            value: (udp::HEADER_LEN + tlen) as u64,
        })
    };
    let udp = |src_port, length| UdpRepr {
        src_port,
        dst_port: udp::ROCE_V2_PORT,
        length,
        checksum: 0,
    };
    match *l3 {
        L3::V2Ipv4 {
            src,
            dst,
            tos,
            ttl,
            src_port,
        } => {
            let ulen = udp_len("ipv4.total_len")?;
            let total =
                ulen.checked_add(ipv4::MIN_HEADER_LEN as u16)
                    .ok_or(Error::FieldOverflow {
                        field: "ipv4.total_len",
                        value: u64::from(ulen) + ipv4::MIN_HEADER_LEN as u64,
                    })?;
            let ip = Ipv4Repr {
                header_len: ipv4::MIN_HEADER_LEN as u8,
                dscp: tos >> 2,
                ecn: tos & 3,
                total_len: total,
                ident,
                dont_frag: true,
                more_frags: false,
                frag_offset: 0,
                ttl,
                protocol: ipv4::PROTO_UDP,
                checksum: 0,
                src,
                dst,
            };
            ip.emit(out)?;
            udp(src_port, ulen).emit(&mut out[ipv4::MIN_HEADER_LEN..])
        }
        L3::V2Ipv6 {
            src,
            dst,
            traffic_class,
            flow_label,
            hop_limit,
            src_port,
        } => {
            let ulen = udp_len("ipv6.payload_len")?;
            let ip = Ipv6Repr {
                traffic_class,
                flow_label,
                payload_len: ulen,
                next_header: ipv4::PROTO_UDP,
                hop_limit,
                src,
                dst,
            };
            ip.emit(out)?;
            udp(src_port, ulen).emit(&mut out[ipv6::HEADER_LEN..])
        }
        L3::V1 {
            sgid,
            dgid,
            traffic_class,
            flow_label,
            hop_limit,
        } => {
            let grh = Ipv6Repr {
                traffic_class,
                flow_label,
                payload_len: u16::try_from(tlen).map_err(|_| Error::FieldOverflow {
                    field: "grh.paylen",
                    value: tlen as u64,
                })?,
                next_header: ipv6::NEXT_HEADER_IBA,
                hop_limit,
                src: sgid,
                dst: dgid,
            };
            grh.emit(out)
        }
    }
}

/// A received RoCE packet that passed every check, ICRC included.
#[derive(Debug, Clone, Copy)]
pub struct RxPacket<'a> {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// The 802.1Q tag it arrived with (the kernel takes it off the frame
    /// and reports it beside), if any.
    pub vlan: Option<VlanTag>,
    /// GRH, or IP and UDP headers (with DSCP and ECN).
    pub network: Network,
    /// BTH through ICRC.
    pub transport: &'a [u8],
}

impl RxPacket<'_> {
    pub fn version(&self) -> RoceVersion {
        self.network.version()
    }

    /// The ECN bits of the IP header or GRH (3: congestion experienced).
    pub fn ecn(&self) -> u8 {
        match self.network {
            Network::V1 { grh } => grh.ecn(),
            Network::V2Ipv4 { ip, .. } => ip.ecn,
            Network::V2Ipv6 { ip, .. } => ip.ecn(),
        }
    }
}

/// What a received frame is.
#[derive(Debug, Clone, Copy)]
pub enum RxFrame<'a> {
    Roce(RxPacket<'a>),
    /// PFC, PAUSE or another MAC control frame, from `src`.
    MacControl {
        src: [u8; 6],
        repr: MacControlRepr,
    },
}

/// Why a received frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxDrop {
    /// Neither RoCE nor MAC control (the kernel filter let it through).
    NotRoce,
    /// RoCE, but a header or length is wrong.
    Malformed(Error),
    /// RoCE, well formed, but the ICRC does not match.
    BadIcrc,
    /// RoCE, well formed, but the receiver would not take it (asked
    /// before the ICRC is computed).
    Unwanted,
}

/// Takes a received frame apart. `vlan_tci` is the tag the kernel took off
/// it, if any.
pub fn parse_rx(frame: &[u8], vlan_tci: Option<u16>) -> Result<RxFrame<'_>, RxDrop> {
    parse_rx_with(frame, vlan_tci, |_, _| true)
}

/// [`parse_rx`], asking `accepts(source MAC, destination QP)` after the
/// header checks and before the ICRC, so that traffic nobody wants costs
/// no CRC.
pub fn parse_rx_with(
    frame: &[u8],
    vlan_tci: Option<u16>,
    accepts: impl FnOnce([u8; 6], u32) -> bool,
) -> Result<RxFrame<'_>, RxDrop> {
    let vlan = vlan_tci.map(VlanTag::from_tci);
    let Some(located) = ferroce_wire::locate(LinkType::Ethernet, frame) else {
        return match pfc::parse_frame(frame) {
            Ok(Some((eth, repr))) => Ok(RxFrame::MacControl { src: eth.src, repr }),
            Ok(None) => Err(RxDrop::NotRoce),
            Err(e) => Err(RxDrop::Malformed(e)),
        };
    };
    let parsed = located.parse().map_err(RxDrop::Malformed)?;
    // `locate` succeeded on an Ethernet frame, so it parsed the header.
    let eth = parsed.ethernet.ok_or(RxDrop::NotRoce)?;
    if !accepts(eth.src, parsed.transport.bth().dest_qp()) {
        return Err(RxDrop::Unwanted);
    }
    parsed.verify_icrc().map_err(|_| RxDrop::BadIcrc)?;
    Ok(RxFrame::Roce(RxPacket {
        src_mac: eth.src,
        dst_mac: eth.dst,
        // A tag left in the frame (none on Linux, which strips it) counts
        // as well as one the kernel reported.
        vlan: vlan.or(eth.vlan),
        network: parsed.network,
        transport: parsed.transport.into_inner(),
    }))
}

#[path = "frame_train.rs"]
mod train;

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
