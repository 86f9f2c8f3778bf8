//! Property tests: for every opcode and every encapsulation, emit then parse
//! gives back the same values, the ICRC verifies, and a change to any byte
//! the ICRC covers (and does not mask) is caught. Arbitrary bytes never panic.

use std::net::{Ipv4Addr, Ipv6Addr};

use ferroce_wire::aeth::{AethRepr, Syndrome};
use ferroce_wire::atomic_eth::AtomicEthRepr;
use ferroce_wire::bth::BthRepr;
use ferroce_wire::deth::DethRepr;
use ferroce_wire::ethernet::{EthernetRepr, VlanTag};
use ferroce_wire::ipv6::Ipv6Repr;
use ferroce_wire::reth::RethRepr;
use ferroce_wire::{
    ExtHeader, LinkType, Network, Opcode, Psn, RoceRepr, TransportPacket, TransportRepr, locate,
};
use proptest::prelude::*;

fn any_opcode() -> impl Strategy<Value = Opcode> {
    let all: Vec<Opcode> = Opcode::all().collect();
    proptest::sample::select(all)
}

#[derive(Debug, Clone, Copy)]
enum Encap {
    V1,
    V2Ipv4,
    V2Ipv6,
}

fn transport_for(op: Opcode) -> impl Strategy<Value = (TransportRepr, Vec<u8>)> {
    let info = op.info().unwrap();
    let payload = if info.payload {
        proptest::collection::vec(any::<u8>(), 0..300).boxed()
    } else {
        Just(Vec::new()).boxed()
    };
    (
        (any::<bool>(), any::<bool>(), any::<u16>(), any::<bool>()),
        (any::<bool>(), 0u32..1 << 24, any::<bool>(), 0u32..1 << 24),
        (any::<u64>(), any::<u32>(), any::<u32>(), any::<u64>()),
        (any::<u64>(), 0u8..0x80, 0u32..1 << 24, any::<u32>()),
        payload,
    )
        .prop_map(
            move |(
                (se, mig, pkey, fecn),
                (becn, qp, ack, psn),
                (va, rkey, len, swap),
                (cmp, syn, msn, imm),
                payload,
            )| {
                let bth = BthRepr {
                    opcode: op,
                    solicited: se,
                    mig_req: mig,
                    pad_count: 0,
                    pkey,
                    fecn,
                    becn,
                    dest_qp: qp,
                    ack_req: ack,
                    psn: Psn::new(psn),
                };
                let mut t = TransportRepr::new(bth, payload.len());
                let h = info.headers;
                let small = |v: u32| v & 0xff_ffff;
                if h.contains(ExtHeader::Rdeth) {
                    t.rdeth = Some(small(rkey));
                }
                if h.contains(ExtHeader::Deth) {
                    t.deth = Some(DethRepr {
                        qkey: imm,
                        src_qp: small(len),
                    });
                }
                if h.contains(ExtHeader::Xrceth) {
                    t.xrceth = Some(small(msn ^ 0x5a5a5a));
                }
                if h.contains(ExtHeader::Feth) {
                    t.feth = Some(imm & 0x3f);
                }
                if h.contains(ExtHeader::Reth) {
                    t.reth = Some(RethRepr {
                        va,
                        rkey,
                        dma_len: len,
                    });
                }
                if h.contains(ExtHeader::AtomicEth) {
                    t.atomic_eth = Some(AtomicEthRepr {
                        va,
                        rkey,
                        swap_add: swap,
                        compare: cmp,
                    });
                }
                if h.contains(ExtHeader::Aeth) {
                    t.aeth = Some(AethRepr {
                        syndrome: Syndrome::from_byte(syn),
                        msn,
                    });
                }
                if h.contains(ExtHeader::AtomicAckEth) {
                    t.atomic_ack = Some(cmp);
                }
                if h.contains(ExtHeader::ImmDt) {
                    t.imm = Some(imm);
                }
                if h.contains(ExtHeader::Ieth) {
                    t.ieth = Some(rkey ^ 1);
                }
                (t, payload)
            },
        )
}

fn any_packet() -> impl Strategy<Value = (RoceRepr, Vec<u8>)> {
    (
        any_opcode(),
        prop_oneof![Just(Encap::V1), Just(Encap::V2Ipv4), Just(Encap::V2Ipv6)],
        proptest::option::of((0u8..8, 0u16..4096)),
        any::<[u8; 16]>(),
        any::<[u8; 16]>(),
        (any::<u16>(), any::<u16>(), 0u32..1 << 20, any::<u8>()),
    )
        .prop_flat_map(|(op, encap, vlan, a, b, (ident, sport, fl, tc))| {
            transport_for(op).prop_map(move |(t, payload)| {
                let mut r = match encap {
                    Encap::V2Ipv4 => RoceRepr::v2_ipv4(
                        Ipv4Addr::new(a[0], a[1], a[2], a[3]),
                        Ipv4Addr::new(b[0], b[1], b[2], b[3]),
                        ident,
                        sport,
                        t,
                    ),
                    Encap::V2Ipv6 => {
                        RoceRepr::v2_ipv6(Ipv6Addr::from(a), Ipv6Addr::from(b), fl, sport, t)
                    }
                    Encap::V1 => RoceRepr {
                        ethernet: None,
                        network: Network::V1 {
                            grh: Ipv6Repr {
                                traffic_class: tc,
                                flow_label: fl,
                                payload_len: 0,
                                next_header: 0x1b,
                                hop_limit: 1,
                                src: Ipv6Addr::from(a),
                                dst: Ipv6Addr::from(b),
                            },
                        },
                        transport: t,
                    },
                };
                r.ethernet = Some(EthernetRepr {
                    dst: [0x52, 0x54, 0, 0x52, 0, 0x0a],
                    src: [0x52, 0x54, 0, 0x52, 0, 0x0b],
                    vlan: vlan.map(|(pcp, vid)| VlanTag {
                        pcp,
                        dei: false,
                        vid,
                    }),
                    ethertype: 0,
                });
                r.fill_lengths();
                (r, payload)
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn emit_parse_round_trip((repr, payload) in any_packet()) {
        let mut buf = vec![0u8; repr.buffer_len()];
        let n = repr.emit(&mut buf, &payload).unwrap();
        prop_assert_eq!(n, buf.len());
        let located = locate(LinkType::Ethernet, &buf).expect("RoCE");
        let frame = located.parse().unwrap();
        prop_assert!(frame.icrc_ok());
        prop_assert_eq!(frame.transport.payload(), &payload[..]);
        let back = RoceRepr::parse(&frame).unwrap();
        prop_assert_eq!(back, repr);
        let fast = located.parse_transport_verified().unwrap();
        prop_assert_eq!(fast.as_bytes(), frame.transport.as_bytes());
    }

    #[test]
    fn icrc_catches_covered_changes((repr, payload) in any_packet(), pick in any::<usize>(), bit in 0u8..8) {
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, &payload).unwrap();
        let eth = repr.ethernet.unwrap().header_len();
        // Flip one bit of the transport (BTH byte 4 and the ICRC excluded):
        // the packet must then fail to parse or fail its ICRC.
        let tstart = eth + repr.network.header_len();
        let covered = buf.len() - 4 - tstart;
        let mut i = tstart + pick % covered;
        if i == tstart + 4 {
            i += 1;
        }
        buf[i] ^= 1 << bit;
        if let Some(l) = locate(LinkType::Ethernet, &buf)
            && let Ok(f) = l.parse()
        {
            prop_assert!(!f.icrc_ok(), "flip at {} not caught", i);
            prop_assert!(l.parse_transport_verified().is_err());
        }
    }

    #[test]
    fn masked_fields_do_not_change_icrc((repr, payload) in any_packet(), ecn in 0u8..4, ttl in any::<u8>()) {
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, &payload).unwrap();
        let l3 = repr.ethernet.unwrap().header_len();
        let tstart = l3 + repr.network.header_len();
        match repr.network {
            Network::V2Ipv4 { .. } => {
                buf[l3 + 1] = ecn; // TOS
                buf[l3 + 8] = ttl;
                buf[l3 + 10] ^= 0x55; // header checksum
                buf[tstart - 1] ^= 0x77; // UDP checksum
            }
            Network::V2Ipv6 { .. } | Network::V1 { .. } => {
                buf[l3 + 1] ^= (ecn << 4) | 0x0f; // traffic class, flow label
                buf[l3 + 7] = ttl; // hop limit
            }
        }
        buf[tstart + 4] |= 0xc0; // FECN, BECN
        let l = locate(LinkType::Ethernet, &buf).unwrap();
        prop_assert!(l.parse().unwrap().icrc_ok());
        prop_assert!(l.parse_transport_verified().is_ok());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), link in 0usize..4) {
        let link = [LinkType::Ethernet, LinkType::LinuxSll, LinkType::LinuxSll2, LinkType::RawIp][link];
        if let Some(l) = locate(link, &bytes) {
            let _ = l.transport_guess();
            if let Ok(f) = l.parse() {
                let _ = f.icrc_ok();
                let _ = RoceRepr::parse(&f);
            }
        }
        if let Ok(t) = TransportPacket::new_checked(&bytes[..]) {
            let _ = TransportRepr::parse(&t);
        }
        let _ = ferroce_wire::mad::Mad::parse(&bytes);
    }

    #[test]
    fn rocev2_like_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..120), op in any::<u8>()) {
        // An IPv4/UDP-4791 prefix so that the transport parser is reached.
        let mut b = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        let tot = (20 + 8 + 1 + tail.len()) as u16;
        b[2..4].copy_from_slice(&tot.to_be_bytes());
        b.extend_from_slice(&[0xc0, 0, 0x12, 0xb7]);
        b.extend_from_slice(&((8 + 1 + tail.len()) as u16).to_be_bytes());
        b.extend_from_slice(&[0, 0, op]);
        b.extend_from_slice(&tail);
        if let Some(l) = locate(LinkType::RawIp, &b)
            && let Ok(f) = l.parse()
        {
            let _ = RoceRepr::parse(&f).unwrap();
            let _ = f.icrc_ok();
        }
    }
}

#[test]
fn emit_refuses_layout_mismatch() {
    let bth = BthRepr {
        opcode: Opcode::RC_RDMA_WRITE_ONLY,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        pkey: 0xffff,
        fecn: false,
        becn: false,
        dest_qp: 0x11,
        ack_req: true,
        psn: Psn::new(1),
    };
    let t = TransportRepr::new(bth, 4);
    let mut buf = [0u8; 64];
    let err = t.emit(&mut buf, &[1, 2, 3, 4]).unwrap_err();
    assert!(err.to_string().contains("reth"), "{err}");
    let mut t2 = TransportRepr::new(bth, 4);
    t2.bth.opcode = Opcode::RC_ACKNOWLEDGE;
    assert!(t2.emit(&mut buf, &[1, 2, 3, 4]).is_err());
}

/// Found by the fuzzer: a parsed IPv4 header with options made `buffer_len`
/// count the options that `emit` does not write.
#[test]
fn ipv4_options_are_dropped_consistently_on_emit() {
    let frame: [u8; 52] = [
        0x46, 0x00, 0x00, 0x34, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0x7f, 0x00, 0x00,
        0x01, 0x7f, 0x00, 0x00, 0x02, 0x01, 0x01, 0x01, 0x01, 0xc0, 0x00, 0x12, 0xb7, 0x00, 0x1c,
        0x00, 0x00, 0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x12, 0x00, 0x00, 0x00, 0x01, 0x1f,
        0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00,
    ];
    let f = locate(LinkType::RawIp, &frame).unwrap().parse().unwrap();
    let repr = RoceRepr::parse(&f).unwrap();
    let mut buf = vec![0u8; repr.buffer_len()];
    let n = repr.emit(&mut buf, f.transport.payload()).unwrap();
    assert_eq!(n, buf.len());
    assert_eq!(n, frame.len() - 4);
    let back = locate(LinkType::RawIp, &buf).unwrap().parse().unwrap();
    assert!(back.icrc_ok());
}

#[test]
fn oversized_packets_are_refused_not_wrapped() {
    let bth = BthRepr {
        opcode: Opcode::RC_SEND_ONLY,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        pkey: 0xffff,
        fecn: false,
        becn: false,
        dest_qp: 0x11,
        ack_req: true,
        psn: Psn::new(1),
    };
    let big = vec![0u8; 65_491];
    let repr = RoceRepr::v2_ipv4(
        Ipv4Addr::LOCALHOST,
        Ipv4Addr::LOCALHOST,
        1,
        0xc000,
        TransportRepr::new(bth, big.len()),
    );
    let mut buf = vec![0u8; repr.buffer_len()];
    assert!(matches!(
        repr.emit(&mut buf, &big),
        Err(ferroce_wire::Error::FieldOverflow { .. })
    ));
    // The largest 4-byte-aligned payload that fits, behind Ethernet (the
    // Ethernet header does not count against the IPv4 total length).
    let max = (0xffff - 20 - 8 - 12 - 4) & !3;
    let mut repr = RoceRepr::v2_ipv4(
        Ipv4Addr::LOCALHOST,
        Ipv4Addr::LOCALHOST,
        1,
        0xc000,
        TransportRepr::new(bth, max),
    );
    repr.ethernet = Some(EthernetRepr {
        dst: [2, 0, 0, 0, 0, 1],
        src: [2, 0, 0, 0, 0, 2],
        vlan: None,
        ethertype: 0,
    });
    let payload = vec![7u8; max];
    let mut buf = vec![0u8; repr.buffer_len()];
    let n = repr.emit(&mut buf, &payload).unwrap();
    let f = locate(LinkType::Ethernet, &buf[..n])
        .unwrap()
        .parse()
        .unwrap();
    assert!(f.icrc_ok());
}
