//! RoCE v2 super-frames in a capture. A sender that hands its kernel a run
//! of RoCE packets as one UDP segmentation-offload super-frame (ferroce's
//! raw backend, any `UDP_SEGMENT` sender) is captured whole on its own
//! host and behind a veth: one Ethernet/IP/UDP header, then the packets
//! back to back, each BTH through ICRC. As one packet its ICRC fails.
//!
//! [`segments`] cuts such a frame into the frames the kernel puts on the
//! wire (`ferroce_io::raw::vnet::split`: each segment its own IP and UDP
//! lengths and IPv4 Identification), at the segment size where the next
//! packet's BTH begins: the same P_Key and destination QP. That packet is
//! most often the next PSN of the same message, but need not be: a SEND
//! followed by the ACK its QP owes the peer (a shorter last segment)
//! travels as one super-frame too. Every segment's ICRC must then check,
//! or the next candidate size is tried, and with none left the frame is
//! left whole (and reported as a bad ICRC): a frame that merely looks like
//! a train is not excused.

use ferroce_io::raw::vnet::{self, VnetHdr};
use ferroce_wire::bth::Bth;
use ferroce_wire::roce::Located;
use ferroce_wire::{LinkType, RoceVersion};

use crate::capture::Frame;

/// The smallest transport packet: a BTH and an ICRC.
const MIN_PACKET: usize = 16;

/// The frames `frame` (whose RoCE packet is `located`) was cut into by the
/// sender's kernel, if it is a super-frame whose every segment checks.
/// As one packet, a super-frame fails its ICRC or, when its first packet
/// has a fixed length (an ACK), parses as that packet with bytes left over.
pub(super) fn segments(frame: &Frame, located: &Located<'_>) -> Option<Vec<Vec<u8>>> {
    if frame.link != LinkType::Ethernet || located.version == RoceVersion::V1 {
        return None;
    }
    let transport = v2_transport(located.l3)?;
    let headers = frame.data.len().checked_sub(transport.len())?;
    segment_sizes(transport).find_map(|size| cut_at(frame, headers, size))
}

/// A RoCE v2 packet's bytes from the BTH on: after the IPv4 header (its
/// IHL) or the IPv6 header, and the UDP header.
fn v2_transport(l3: &[u8]) -> Option<&[u8]> {
    const IPV6_HEADER: usize = 40;
    const UDP_HEADER: usize = 8;
    let ip = match l3.first()? >> 4 {
        4 => usize::from(l3[0] & 0x0f) * 4,
        6 => IPV6_HEADER,
        _ => return None,
    };
    l3.get(ip + UDP_HEADER..)
}

/// `frame` cut into segments of `size` transport bytes, if there are
/// several and every one's ICRC checks.
fn cut_at(frame: &Frame, headers: usize, size: usize) -> Option<Vec<Vec<u8>>> {
    let mut data = frame.data.clone();
    let mut cut = Vec::new();
    let mut all_check = true;
    let split = vnet::split(
        &VnetHdr::udp_train(headers, size),
        &mut data,
        |seg, guess| {
            let ok = checks(seg);
            if ok || !guess {
                all_check &= ok;
                cut.push(seg.to_vec());
            }
            ok
        },
    );
    (split.is_ok() && all_check && cut.len() > 1).then_some(cut)
}

/// Where the second packet may start: each offset (a multiple of 4, as
/// every RoCE packet's length is) holding a BTH of the same P_Key and
/// destination QP, those with the next PSN first.
fn segment_sizes(transport: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let first = Bth::new_checked(transport).ok();
    let key = first.map(|b| (b.pkey(), b.dest_qp(), b.psn().next()));
    let offsets = move || {
        (MIN_PACKET..transport.len().saturating_sub(MIN_PACKET - 1))
            .step_by(4)
            .filter_map(move |at| {
                let (pkey, qp, _) = key?;
                let b = Bth::new_checked(&transport[at..]).ok()?;
                (b.pkey() == pkey && b.dest_qp() == qp).then_some((at, b.psn()))
            })
    };
    let next = key.map(|(_, _, next)| next);
    let in_order = offsets().filter(move |&(_, psn)| Some(psn) == next);
    let others = offsets().filter(move |&(_, psn)| Some(psn) != next);
    in_order.chain(others).map(|(at, _)| at)
}

/// Whether `segment` (a whole Ethernet frame) is a RoCE packet whose ICRC
/// checks.
fn checks(segment: &[u8]) -> bool {
    ferroce_wire::locate(LinkType::Ethernet, segment)
        .and_then(|l| l.parse().ok())
        .is_some_and(|f| f.icrc_ok())
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use ferroce_io::raw::frame::{FrameBuilder, FrameSpec, L3};
    use ferroce_wire::{Opcode, samples};

    use super::*;

    /// A super-frame of `count` RC_SEND_MIDDLE packets of 256 bytes, as
    /// ferroce's raw backend hands it to the kernel (and a capture behind
    /// a veth shows it); for 1, a plain frame.
    fn super_frame(count: usize) -> Frame {
        let packets: Vec<_> = (0..count)
            .map(|i| (Opcode::RC_SEND_MIDDLE, 7 + i as u32, 256))
            .collect();
        frame_of(&packets)
    }

    /// One frame carrying the packets (opcode, PSN, payload length).
    fn frame_of(packets: &[(Opcode, u32, usize)]) -> Frame {
        let count = packets.len();
        let packets: Vec<Vec<u8>> = packets
            .iter()
            .map(|&(op, psn, len)| {
                let t = samples::transport(op, psn, len);
                let mut buf = vec![0; t.buffer_len()];
                let used = t.emit(&mut buf, &vec![psn as u8; len]).unwrap();
                buf.truncate(used);
                buf
            })
            .collect();
        let spec = FrameSpec {
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_mac: [2, 0, 0, 0, 0, 1],
            vlan: None,
            l3: L3::V2Ipv4 {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 0, 0, 2),
                tos: 0x6a,
                ttl: 64,
                src_port: 0xc123,
            },
        };
        let mut out = vec![0; 1 << 16];
        let mut builder = FrameBuilder::new(0x4000);
        let len = if count == 1 {
            builder.build(&spec, &packets[0], &mut out).unwrap()
        } else {
            let train = packets.iter().map(Vec::as_slice);
            builder.build_train(&spec, train, &mut out).unwrap().0
        };
        out.truncate(len);
        Frame {
            number: 1,
            timestamp: Duration::ZERO,
            orig_len: len as u32,
            link: LinkType::Ethernet,
            data: out,
        }
    }

    fn first(frame: &Frame) -> Located<'_> {
        ferroce_wire::locate(frame.link, &frame.data).unwrap()
    }

    fn icrc_ok(frame: &Frame) -> bool {
        first(frame).parse().is_ok_and(|f| f.icrc_ok())
    }

    #[test]
    fn a_super_frame_is_cut_into_packets_whose_icrc_checks() {
        let frame = super_frame(5);
        assert!(!icrc_ok(&frame), "whole, it is no one packet");
        let cut = segments(&frame, &first(&frame)).expect("cut");
        assert_eq!(cut.len(), 5);
        assert!(cut.iter().all(|s| checks(s)));
    }

    #[test]
    fn a_send_and_the_ack_its_qp_owes_are_cut_at_the_send() {
        // The ACK carries the PSN it acknowledges, not the next one.
        let frame = frame_of(&[
            (Opcode::RC_SEND_ONLY, 40, 126),
            (Opcode::RC_ACKNOWLEDGE, 9, 0),
        ]);
        assert!(!icrc_ok(&frame));
        let cut = segments(&frame, &first(&frame)).expect("cut");
        assert_eq!(cut.len(), 2);
        assert!(cut.iter().all(|s| checks(s)));
    }

    #[test]
    fn two_acks_are_cut_though_the_first_parses_as_malformed() {
        let frame = frame_of(&[
            (Opcode::RC_ACKNOWLEDGE, 9, 0),
            (Opcode::RC_ACKNOWLEDGE, 12, 0),
        ]);
        assert!(first(&frame).parse().is_err(), "bytes follow an ACK");
        let cut = segments(&frame, &first(&frame)).expect("cut");
        assert_eq!(cut.len(), 2);
    }

    #[test]
    fn a_damaged_super_frame_is_left_whole() {
        let mut frame = super_frame(3);
        let at = frame.data.len() - 300; // in the last packet's payload
        frame.data[at] ^= 1;
        assert!(segments(&frame, &first(&frame)).is_none());
    }

    #[test]
    fn a_single_packet_is_no_super_frame() {
        let frame = super_frame(1);
        assert!(icrc_ok(&frame));
        assert!(segments(&frame, &first(&frame)).is_none());
    }
}
