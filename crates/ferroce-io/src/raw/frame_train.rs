//! Super-frames: a train of RoCE v2 packets of one flow built as one frame
//! for the kernel to cut (see [`super::super::vnet`]).

use ferroce_wire::Error;
use ferroce_wire::ethernet::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, EthernetRepr};
use ferroce_wire::icrc;
use ferroce_wire::transport::{BTH_LEN, ICRC_LEN};
use ferroce_wire::udp::{self, UdpRepr};
use ferroce_wire::{ipv4, ipv6};

use super::{FrameBuilder, FrameSpec, L3, emit_l3};
use crate::raw::vnet::{self, VnetHdr};

/// What a valid train is: its ethertype, packets, the first's length (the
/// segment size) and the bytes of all.
struct Shape {
    ethertype: u16,
    count: usize,
    segment: usize,
    total: usize,
}

/// Checks that `transports` can go as one super-frame: RoCE v2, 2 to
/// [`vnet::MAX_SEGMENTS`] packets, each a transport (BTH and ICRC at
/// least), all as long as the first but the last, which may be shorter.
fn shape<'t>(l3: &L3, transports: impl Iterator<Item = &'t [u8]> + Clone) -> Result<Shape, Error> {
    let ethertype = match l3 {
        L3::V2Ipv4 { .. } => ETHERTYPE_IPV4,
        L3::V2Ipv6 { .. } => ETHERTYPE_IPV6,
        // No UDP header: nothing the kernel could cut by.
        L3::V1 { .. } => {
            return Err(Error::BadVersion {
                field: "train.roce_version",
                value: 1,
            });
        }
    };
    let count = transports.clone().count();
    let segment = transports.clone().next().map_or(0, <[u8]>::len);
    let uneven = transports.clone().enumerate().find(|(i, t)| {
        let shorter = t.len() < segment && i + 1 < count;
        t.len() < BTH_LEN + ICRC_LEN || t.len() > segment || shorter
    });
    if let Some((_, t)) = uneven {
        return Err(Error::BadLength {
            field: "train.segment",
            claimed: t.len(),
            actual: segment,
        });
    }
    if !(2..=vnet::MAX_SEGMENTS).contains(&count) {
        return Err(Error::FieldOverflow {
            field: "train.segments",
            value: count as u64,
        });
    }
    let total = transports.map(<[u8]>::len).sum();
    Ok(Shape {
        ethertype,
        count,
        segment,
        total,
    })
}

impl FrameBuilder {
    /// Writes one super-frame for a train of RoCE v2 packets of one flow
    /// (`transports`, BTH through ICRC, all as long as the first but the
    /// last, which may be shorter) into `out`, for the kernel to cut into
    /// one frame each; returns its length and the virtio-net header that
    /// asks for the cut. Each packet's ICRC is computed over the IP and
    /// UDP headers its segment will carry (lengths of its own, IPv4
    /// Identification the train's first plus its index), and the UDP
    /// checksum holds the pseudo-header sum the checksum offload
    /// completes. RoCE v1 cannot be cut (no UDP header): refused, as are
    /// trains of mixed sizes or of more than [`vnet::MAX_SEGMENTS`].
    pub fn build_train<'t>(
        &mut self,
        spec: &FrameSpec,
        transports: impl Iterator<Item = &'t [u8]> + Clone,
        out: &mut [u8],
    ) -> Result<(usize, VnetHdr), Error> {
        let shape = shape(&spec.l3, transports.clone())?;
        let hlen = Self::header_len(spec);
        let len = hlen + shape.total;
        if out.len() < len {
            return Err(Error::BufferTooSmall {
                needed: len,
                available: out.len(),
            });
        }
        let eth = EthernetRepr {
            dst: spec.dst_mac,
            src: spec.src_mac,
            vlan: spec.vlan,
            ethertype: shape.ethertype,
        };
        let l3_start = eth.emit(out)?;
        let udp_start = hlen - udp::HEADER_LEN;
        let ident = self.take_idents(&spec.l3, shape.count);
        emit_l3(&spec.l3, shape.total, ident, &mut out[l3_start..])?;
        seed_checksum(&spec.l3, shape.total, &mut out[udp_start..])?;
        // Each segment's own headers, for its ICRC only: emitted once for
        // the segment size (again for a shorter last one), with the IPv4
        // Identification patched per segment. The IPv4 checksum this leaves
        // stale is masked out of the ICRC.
        let mut seg_hdr = [0u8; ipv6::HEADER_LEN + udp::HEADER_LEN];
        let ip_len = udp_start - l3_start;
        let v4 = matches!(spec.l3, L3::V2Ipv4 { .. });
        let mut seg_len = None;
        let mut at = hlen;
        for (i, t) in transports.enumerate() {
            let end = at + t.len();
            out[at..end].copy_from_slice(t);
            let seg_ident = ident.wrapping_add(i as u16);
            if seg_len != Some(t.len()) {
                emit_l3(&spec.l3, t.len(), seg_ident, &mut seg_hdr)?;
                seg_len = Some(t.len());
            } else if v4 {
                seg_hdr[ipv4::IDENT].copy_from_slice(&seg_ident.to_be_bytes());
            }
            let (ip_h, udp_h) = seg_hdr[..ip_len + udp::HEADER_LEN].split_at(ip_len);
            let value = icrc::compute_v2_parts(ip_h, udp_h, &out[at..end - ICRC_LEN])?;
            out[end - ICRC_LEN..end].copy_from_slice(&value.to_le_bytes());
            at = end;
        }
        Ok((len, VnetHdr::udp_train(hlen, shape.segment)))
    }
}

/// Puts the pseudo-header sum (addresses, protocol, the UDP length of
/// `total` payload bytes) in the UDP header at the start of `udp_out`: the
/// kernel adjusts it to each segment's length and the offload completes
/// it over the segment.
fn seed_checksum(l3: &L3, total: usize, udp_out: &mut [u8]) -> Result<(), Error> {
    let udp_len = (udp::HEADER_LEN + total) as u32;
    let checksum = match l3 {
        L3::V2Ipv4 { src, dst, .. } => {
            vnet::pseudo_header_sum(&src.octets(), &dst.octets(), udp_len)
        }
        L3::V2Ipv6 { src, dst, .. } => {
            vnet::pseudo_header_sum(&src.octets(), &dst.octets(), udp_len)
        }
        L3::V1 { .. } => 0,
    };
    let udp = UdpRepr {
        checksum,
        ..UdpRepr::parse(udp_out)?
    };
    udp.emit(udp_out)
}
