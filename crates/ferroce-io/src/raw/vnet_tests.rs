use std::net::{Ipv4Addr, Ipv6Addr};

use ferroce_wire::{Opcode, samples};

use super::*;
use crate::raw::frame::{FrameBuilder, FrameSpec, L3, RxFrame, parse_rx};

const SPEC4: L3 = L3::V2Ipv4 {
    src: Ipv4Addr::new(10, 0, 0, 1),
    dst: Ipv4Addr::new(10, 0, 0, 2),
    tos: (26 << 2) | 2,
    ttl: 64,
    src_port: 0xc123,
};
const SPEC6: L3 = L3::V2Ipv6 {
    src: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
    dst: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
    traffic_class: 0x68,
    flow_label: 0x12345,
    hop_limit: 64,
    src_port: 0xc456,
};

fn spec(l3: L3) -> FrameSpec {
    FrameSpec {
        dst_mac: [2, 0, 0, 0, 0, 2],
        src_mac: [2, 0, 0, 0, 0, 1],
        vlan: None,
        l3,
    }
}

/// `count` RC_SEND_MIDDLE packets of `len` payload bytes (the last
/// `last` bytes), consecutive PSNs: a train.
fn train(count: usize, len: usize, last: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            let n = if i + 1 == count { last } else { len };
            let t = samples::transport(Opcode::RC_SEND_MIDDLE, 100 + i as u32, n);
            let mut buf = vec![0; t.buffer_len()];
            let payload: Vec<u8> = (0..n).map(|k| (k + i) as u8).collect();
            let used = t.emit(&mut buf, &payload).unwrap();
            buf.truncate(used);
            buf
        })
        .collect()
}

/// The UDP checksum offset of a frame built for `l3` (Ethernet, then IP,
/// then UDP's checksum at 6).
fn udp_checksum_at(l3: &L3) -> usize {
    FrameBuilder::header_len(&spec(*l3)) - 2
}

/// A super-frame cut as the kernel cuts it is, byte for byte (but the UDP
/// checksum, which the offload fills in and the ICRC masks), the frames
/// built one at a time with consecutive Identifications: every segment's
/// ICRC is right for the header it carries.
#[test]
fn a_cut_train_is_the_frames_built_one_by_one() {
    for l3 in [SPEC4, SPEC6] {
        let packets = train(5, 1024, 300);
        let mut out = vec![0u8; 64 << 10];
        let (len, hdr) = FrameBuilder::new(0xfffd)
            .build_train(&spec(l3), packets.iter().map(Vec::as_slice), &mut out)
            .unwrap();
        assert!(hdr.is_gso());
        assert_eq!(usize::from(hdr.gso_size), packets[0].len());
        let mut one_by_one = FrameBuilder::new(0xfffd);
        let mut cut = Vec::new();
        let segments = split(&hdr, &mut out[..len], |f, _| {
            cut.push(f.to_vec());
            true
        })
        .unwrap();
        assert_eq!(segments, packets.len());
        let at = udp_checksum_at(&l3);
        for (segment, packet) in cut.iter_mut().zip(&packets) {
            let mut alone = vec![0u8; 2048];
            let n = one_by_one.build(&spec(l3), packet, &mut alone).unwrap();
            segment[at..at + 2].fill(0);
            assert_eq!(segment[..], alone[..n], "{l3:?}");
            let Ok(RxFrame::Roce(p)) = parse_rx(segment, None) else {
                panic!(
                    "segment does not check: {:?}",
                    parse_rx(segment, None).err()
                );
            };
            assert_eq!(p.transport.len(), packet.len());
        }
    }
}

/// The pseudo-header sum left in the UDP checksum field, completed over
/// each segment's UDP header and payload as the offload does after the
/// kernel's length adjustment, gives a checksum that verifies.
#[test]
fn the_udp_checksum_seed_completes_to_a_valid_checksum() {
    let packets = train(3, 1024, 1024);
    let mut out = vec![0u8; 64 << 10];
    let (len, hdr) = FrameBuilder::new(7)
        .build_train(&spec(SPEC4), packets.iter().map(Vec::as_slice), &mut out)
        .unwrap();
    let udp_at = usize::from(hdr.csum_start);
    let ip = &out[14..34];
    let seed = u16::from_be_bytes([out[udp_at + 6], out[udp_at + 7]]);
    let total = len - udp_at;
    assert_eq!(
        seed,
        pseudo_header_sum(&ip[12..16], &ip[16..20], total as u32)
    );
    // Completing over the whole super-frame's UDP part (as the offload
    // would without segmenting) verifies against an independent sum.
    let mut sum: u32 = u32::from(seed);
    let mut udp = out[udp_at..len].to_vec();
    udp[6..8].fill(0);
    for pair in udp.chunks(2) {
        sum += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let check = !(sum as u16);
    let mut verify: u32 = 0;
    for w in [&ip[12..14], &ip[14..16], &ip[16..18], &ip[18..20]] {
        verify += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    verify += 17 + total as u32;
    udp[6..8].copy_from_slice(&check.to_be_bytes());
    for pair in udp.chunks(2) {
        verify += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
    }
    while verify > 0xffff {
        verify = (verify & 0xffff) + (verify >> 16);
    }
    assert_eq!(verify, 0xffff);
}

#[test]
fn trains_that_cannot_be_cut_are_refused() {
    let mut out = vec![0u8; 64 << 10];
    let mut b = FrameBuilder::new(0);
    let v1 = L3::V1 {
        sgid: Ipv6Addr::LOCALHOST,
        dgid: Ipv6Addr::LOCALHOST,
        traffic_class: 0,
        flow_label: 0,
        hop_limit: 1,
    };
    let even = train(3, 256, 256);
    let slices = || even.iter().map(Vec::as_slice);
    assert!(b.build_train(&spec(v1), slices(), &mut out).is_err());
    // A short packet in the middle, a longer last one, a lone packet, too
    // many packets, too small a buffer.
    let mut bumpy = train(3, 256, 256);
    bumpy[1].truncate(200);
    let longer_last = train(3, 256, 300);
    let many = train(MAX_SEGMENTS + 1, 16, 16);
    for bad in [&bumpy, &longer_last, &train(1, 256, 256), &many] {
        let r = b.build_train(&spec(SPEC4), bad.iter().map(Vec::as_slice), &mut out);
        assert!(r.is_err(), "{} packets built", bad.len());
    }
    assert!(
        b.build_train(&spec(SPEC4), slices(), &mut out[..500])
            .is_err()
    );
}

/// Hostile input: headers that lie are refused or yield segments that
/// fail their own checks, never a panic.
#[test]
fn lying_virtio_headers_are_refused_not_trusted() {
    let packets = train(4, 512, 512);
    let mut out = vec![0u8; 64 << 10];
    let (len, hdr) = FrameBuilder::new(1)
        .build_train(&spec(SPEC4), packets.iter().map(Vec::as_slice), &mut out)
        .unwrap();
    let frame = &out[..len];
    // Each cut on a copy: cutting rewrites the frame.
    let cut = |h: VnetHdr, f: &[u8]| {
        let mut ok = 0;
        let r = split(&h, &mut f.to_vec(), |seg, _| {
            let good = parse_rx(seg, None).is_ok();
            ok += usize::from(good);
            good
        });
        (r, ok)
    };
    let tcp = VnetHdr { gso_type: 1, ..hdr };
    assert_eq!(cut(tcp, frame).0, Err(BadGso::Type(1)));
    let zero = VnetHdr { gso_size: 0, ..hdr };
    assert_eq!(cut(zero, frame).0, Err(BadGso::NoSegmentSize));
    let tiny = VnetHdr { gso_size: 1, ..hdr };
    assert!(matches!(
        cut(tiny, frame).0,
        Err(BadGso::TooManySegments(_))
    ));
    // Cut in the wrong places: every piece fails its ICRC or its parse.
    let wrong = VnetHdr {
        gso_size: hdr.gso_size - 4,
        ..hdr
    };
    let (r, ok) = cut(wrong, frame);
    assert!(r.is_ok() && ok == 0, "{r:?}, {ok} passed");
    // Every prefix of the frame, and a frame that is not RoCE v2.
    for end in 0..len.min(200) {
        let _ = cut(hdr, &frame[..end]);
    }
    let mut v6 = frame.to_vec();
    v6[12..14].copy_from_slice(&0x8915u16.to_be_bytes());
    assert_eq!(cut(hdr, &v6).0, Err(BadGso::NotRoceV2));
    // The right header cuts it into frames that all check.
    assert_eq!(cut(hdr, frame), (Ok(4), 4));
}

/// GRO merges a train whose packets all carry one Identification (0 from
/// an unconnected Linux socket), keeping the first header: cut with Identifications counting up, every segment but
/// the first would fail its ICRC; the fixed way is found and kept.
#[test]
fn a_merged_train_with_one_fixed_identification_is_cut_right() {
    for first_ident in [0, 0x1234] {
        let packets = train(4, 512, 200);
        let hlen = FrameBuilder::header_len(&spec(SPEC4));
        let mut merged = Vec::new();
        for (i, p) in packets.iter().enumerate() {
            let mut f = vec![0u8; 2048];
            let n = FrameBuilder::new(first_ident)
                .build(&spec(SPEC4), p, &mut f)
                .unwrap();
            let from = if i == 0 { 0 } else { hlen };
            merged.extend_from_slice(&f[from..n]);
        }
        let hdr = VnetHdr::udp_train(hlen, packets[0].len());
        let (mut ok, mut guesses) = (0, 0);
        let r = split(&hdr, &mut merged, |seg, guess| {
            let good = parse_rx(seg, None).is_ok();
            ok += usize::from(good);
            guesses += usize::from(guess);
            good
        });
        assert_eq!((r, ok, guesses), (Ok(4), 4, 1));
    }
}

#[test]
fn the_header_round_trips() {
    let h = VnetHdr::udp_train(42, 1040);
    let mut b = [0u8; VNET_HDR_LEN];
    h.emit(&mut b);
    assert_eq!(VnetHdr::parse(&b), h);
    assert_eq!((h.csum_start, h.csum_offset, h.hdr_len), (34, 6, 42));
    assert!(!VnetHdr::default().is_gso());
}
