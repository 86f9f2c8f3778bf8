use super::*;
use ferroce_wire::{Opcode, samples};

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

/// A SEND_ONLY transport with `len` payload bytes (ICRC bytes zero).
fn transport(len: usize) -> Vec<u8> {
    let t = samples::transport(Opcode::RC_SEND_ONLY, 77, len);
    let mut buf = vec![0; t.buffer_len()];
    let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let n = t.emit(&mut buf, &payload).unwrap();
    buf.truncate(n);
    buf
}

fn specs() -> Vec<FrameSpec> {
    let v4 = L3::V2Ipv4 {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 2),
        tos: (26 << 2) | 2,
        ttl: 64,
        src_port: 0xc123,
    };
    let v6 = L3::V2Ipv6 {
        src: "fd00::1".parse().unwrap(),
        dst: "fd00::2".parse().unwrap(),
        traffic_class: 3,
        flow_label: 0x12345,
        hop_limit: 64,
        src_port: 0xc321,
    };
    let v1 = L3::V1 {
        sgid: "fe80::ff:fe00:a".parse().unwrap(),
        dgid: "fe80::ff:fe00:b".parse().unwrap(),
        traffic_class: 0,
        flow_label: 0,
        hop_limit: 1,
    };
    let tag = Some(VlanTag {
        pcp: 3,
        dei: false,
        vid: 100,
    });
    [v4, v6, v1]
        .into_iter()
        .flat_map(|l3| {
            [None, tag].map(|vlan| FrameSpec {
                dst_mac: MAC_B,
                src_mac: MAC_A,
                vlan,
                l3,
            })
        })
        .collect()
}

#[test]
fn every_kind_round_trips_with_its_icrc() {
    let mut b = FrameBuilder::new(7);
    let t = transport(100);
    for spec in specs() {
        let mut out = vec![0; 512];
        let n = b.build(&spec, &t, &mut out).unwrap();
        let frame = &out[..n];
        let RxFrame::Roce(p) = parse_rx(frame, None).unwrap() else {
            panic!("not RoCE");
        };
        assert_eq!((p.src_mac, p.dst_mac, p.vlan), (MAC_A, MAC_B, spec.vlan));
        assert_eq!(p.transport[..t.len() - 4], t[..t.len() - 4]);
        match (spec.l3, p.network) {
            (L3::V2Ipv4 { .. }, Network::V2Ipv4 { ip, udp }) => {
                assert_eq!(
                    (ip.dscp, ip.ecn, ip.dont_frag, udp.checksum),
                    (26, 2, true, 0)
                );
                assert_eq!(udp.src_port, 0xc123);
            }
            (L3::V2Ipv6 { .. }, Network::V2Ipv6 { ip, udp }) => {
                assert_eq!(
                    (ip.flow_label, ip.traffic_class, udp.checksum),
                    (0x12345, 3, 0)
                );
            }
            (L3::V1 { .. }, Network::V1 { grh }) => assert_eq!(grh.hop_limit, 1),
            (want, got) => panic!("built {want:?}, parsed {got:?}"),
        }
    }
}

#[test]
fn ipv4_identification_counts_and_is_covered_by_the_icrc() {
    let mut b = FrameBuilder::new(0xfffe);
    let spec = specs()[0];
    let t = transport(8);
    let mut idents = Vec::new();
    for _ in 0..3 {
        let mut out = vec![0; 256];
        let n = b.build(&spec, &t, &mut out).unwrap();
        let Ok(RxFrame::Roce(RxPacket {
            network: Network::V2Ipv4 { ip, .. },
            ..
        })) = parse_rx(&out[..n], None)
        else {
            panic!("not an IPv4 RoCE frame");
        };
        idents.push(ip.ident);
        // Changing the Identification breaks the ICRC: the raw backend
        // checks what the UDP one cannot.
        out[18] ^= 1;
        assert_eq!(parse_rx(&out[..n], None).err(), Some(RxDrop::BadIcrc));
    }
    assert_eq!(idents, [0xfffe, 0xffff, 0]);
}

#[test]
fn corrupted_payload_is_a_bad_icrc_and_short_frames_are_padded() {
    let mut b = FrameBuilder::default();
    let spec = specs()[0];
    // BTH + ICRC alone: 14 + 20 + 8 + 12 + 4 = 58 bytes, padded to 60.
    let t = transport(0);
    let mut out = vec![0xaa; 128];
    let n = b.build(&spec, &t, &mut out).unwrap();
    assert_eq!(n, MIN_FRAME_LEN);
    assert_eq!(&out[58..60], &[0, 0]);
    assert!(matches!(parse_rx(&out[..n], None), Ok(RxFrame::Roce(_))));
    out[50] ^= 0x40;
    assert_eq!(parse_rx(&out[..n], None).err(), Some(RxDrop::BadIcrc));
}

#[test]
fn kernel_reported_tag_gives_the_pcp() {
    let mut b = FrameBuilder::default();
    let mut out = vec![0; 256];
    let n = b.build(&specs()[0], &transport(4), &mut out).unwrap();
    let tci = VlanTag {
        pcp: 5,
        dei: false,
        vid: 7,
    }
    .tci();
    let Ok(RxFrame::Roce(p)) = parse_rx(&out[..n], Some(tci)) else {
        panic!("not RoCE");
    };
    assert_eq!(p.vlan.map(|t| (t.pcp, t.vid)), Some((5, 7)));
}

#[test]
fn bad_inputs_are_refused_without_panics() {
    let mut b = FrameBuilder::default();
    let spec = specs()[1];
    assert!(b.build(&spec, &[0; 15], &mut [0; 256]).is_err());
    assert!(matches!(
        b.build(&spec, &transport(64), &mut [0; 100]),
        Err(Error::BufferTooSmall { .. })
    ));
    let mut out = vec![0; 256];
    let n = b.build(&spec, &transport(64), &mut out).unwrap();
    for len in 0..n {
        assert!(parse_rx(&out[..len], None).is_err(), "{len} bytes accepted");
    }
    let ping = [0u8; 98];
    assert_eq!(parse_rx(&ping, None).err(), Some(RxDrop::NotRoce));
}

#[test]
fn pfc_frames_are_recognised() {
    let repr = MacControlRepr::Pfc {
        enabled: 8,
        quanta: [0, 0, 0, 100, 0, 0, 0, 0],
    };
    let f = pfc::frame(MAC_A, &repr);
    let Ok(RxFrame::MacControl { src, repr: got }) = parse_rx(&f, None) else {
        panic!("not MAC control");
    };
    assert_eq!((src, got), (MAC_A, repr));
}

#[test]
fn unwanted_packets_are_refused_before_the_icrc() {
    let mut b = FrameBuilder::default();
    let mut out = vec![0; 256];
    let n = b.build(&specs()[0], &transport(8), &mut out).unwrap();
    // Corrupt the ICRC: an unwanted packet is refused as unwanted, so
    // the ICRC was never looked at.
    out[n - 1] ^= 0xff;
    let mut asked = None;
    let r = parse_rx_with(&out[..n], None, |mac, qp| {
        asked = Some((mac, qp));
        false
    });
    assert_eq!(r.err(), Some(RxDrop::Unwanted));
    let qp = samples::transport(Opcode::RC_SEND_ONLY, 0, 0).bth.dest_qp;
    assert_eq!(asked, Some((MAC_A, qp)));
    assert_eq!(
        parse_rx_with(&out[..n], None, |_, _| true).err(),
        Some(RxDrop::BadIcrc)
    );
}
