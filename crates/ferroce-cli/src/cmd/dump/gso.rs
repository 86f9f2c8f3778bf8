//! RoCE v2 super-frames in a capture. A sender that hands its kernel a run
//! of RoCE packets as one UDP segmentation-offload super-frame (ferroce's
//! raw backend, any `UDP_SEGMENT` sender) is captured whole on its own
//! host and behind a veth: one Ethernet/IP/UDP header, then the packets
//! back to back, each BTH through ICRC. As one packet its ICRC fails.
//!
//! [`segments`] cuts such a frame into the frames the kernel puts on the
//! wire (`ferroce_io::raw::vnet::split`: each segment its own IP and UDP
//! lengths and IPv4 Identification), at the segment size where the next
//! packet's BTH begins: the same P_Key and destination QP, the next PSN.
//! Every segment's ICRC must then check, or the frame is left whole (and
//! reported as a bad ICRC): a frame that merely looks like a train is not
//! excused.

use ferroce_io::raw::vnet::{self, VnetHdr};
use ferroce_wire::bth::Bth;
use ferroce_wire::roce::RoceFrame;
use ferroce_wire::{LinkType, RoceVersion};

use crate::capture::Frame;

/// The smallest transport packet: a BTH and an ICRC.
const MIN_PACKET: usize = 16;

/// The frames `frame` (whose first packet is `first`) was cut into by the
/// sender's kernel, if it is a super-frame whose every segment checks.
pub(super) fn segments(frame: &Frame, first: &RoceFrame<'_>) -> Option<Vec<Vec<u8>>> {
    if frame.link != LinkType::Ethernet || first.version() == RoceVersion::V1 {
        return None;
    }
    let transport = first.transport.as_bytes();
    let headers = frame.data.len().checked_sub(transport.len())?;
    let size = segment_size(transport)?;
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

/// Where the second packet starts: the first offset (a multiple of 4, as
/// every RoCE packet's length is) holding a BTH of the same P_Key and
/// destination QP with the next PSN.
fn segment_size(transport: &[u8]) -> Option<usize> {
    let first = Bth::new_checked(transport).ok()?;
    let (pkey, qp, next) = (first.pkey(), first.dest_qp(), first.psn().next());
    (MIN_PACKET..transport.len().saturating_sub(MIN_PACKET - 1))
        .step_by(4)
        .find(|&at| {
            Bth::new_checked(&transport[at..])
                .is_ok_and(|b| b.pkey() == pkey && b.dest_qp() == qp && b.psn() == next)
        })
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
        let packets: Vec<Vec<u8>> = (0..count)
            .map(|i| {
                let t = samples::transport(Opcode::RC_SEND_MIDDLE, 7 + i as u32, 256);
                let mut buf = vec![0; t.buffer_len()];
                let used = t.emit(&mut buf, &[i as u8; 256]).unwrap();
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

    fn first(frame: &Frame) -> RoceFrame<'_> {
        ferroce_wire::locate(frame.link, &frame.data)
            .unwrap()
            .parse()
            .unwrap()
    }

    #[test]
    fn a_super_frame_is_cut_into_packets_whose_icrc_checks() {
        let frame = super_frame(5);
        assert!(!first(&frame).icrc_ok(), "whole, it is no one packet");
        let cut = segments(&frame, &first(&frame)).expect("cut");
        assert_eq!(cut.len(), 5);
        assert!(cut.iter().all(|s| checks(s)));
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
        assert!(first(&frame).icrc_ok());
        assert!(segments(&frame, &first(&frame)).is_none());
    }
}
