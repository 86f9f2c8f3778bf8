//! A fixed, deterministic set of well-formed RoCE packets: every opcode of
//! the table over RoCE v2/IPv4, a representative set over RoCE v2/IPv6 and
//! RoCE v1, an ECN-marked packet, a VLAN-tagged one, and a CM REQ on QP1.
//!
//! Used for the capture the repository ships, the Wireshark comparison test,
//! benchmarks and the fuzzer's seed corpus. Addresses are loopback and
//! link-local only. Beside them, [`rping`] holds the CM MADs of a real
//! kernel capture, which the MAD and CM tests compare against.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::aeth::{AethRepr, NakCode, Syndrome};
use crate::atomic_eth::AtomicEthRepr;
use crate::bth::BthRepr;
use crate::deth::DethRepr;
use crate::ethernet::{EthernetRepr, VlanTag};
use crate::ipv6::Ipv6Repr;
use crate::mad::{self, CmMessage, CmPath, CmReq, Mad, MadHeader};
use crate::reth::RethRepr;
use crate::udp::{flow_label_from_qpns, source_port_from_flow_label};
use crate::{ExtHeader, Network, Opcode, Psn, RoceRepr, Transport, TransportRepr};

/// One sample: a description, the packet as values, and its payload.
#[derive(Debug, Clone)]
pub struct Sample {
    /// What the packet is: encapsulation and opcode, e.g. `"v2-ipv4 RC_SEND_ONLY payload=13"`.
    pub description: String,
    /// The packet's headers as values.
    pub repr: RoceRepr,
    /// The payload bytes (pad excluded).
    pub payload: Vec<u8>,
}

impl Sample {
    /// The packet as an Ethernet frame.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut buf = vec![0u8; self.repr.buffer_len()];
        // Every sample is built from valid values; a failure here is a bug
        // in this module, caught by its tests.
        let n = self.repr.emit(&mut buf, &self.payload).unwrap_or(0);
        buf.truncate(n);
        buf
    }
}

const MAC_A: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0b];
const QPN_A: u32 = 0x11;
const QPN_B: u32 = 0x12;

fn payload(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A transport repr for `op` with plausible values in every header it has.
pub fn transport(op: Opcode, psn: u32, payload_len: usize) -> TransportRepr {
    let info = op.info().map(|i| (i.headers, i.payload));
    let (headers, has_payload) = info.unwrap_or_default();
    let bth = BthRepr {
        opcode: op,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        pkey: 0xffff,
        fecn: false,
        becn: op == Opcode::CNP,
        dest_qp: QPN_B,
        ack_req: wants_ack(op),
        psn: Psn::new(psn),
    };
    let mut t = TransportRepr::new(bth, if has_payload { payload_len } else { 0 });
    let set = |h| headers.contains(h);
    if set(ExtHeader::Rdeth) {
        t.rdeth = Some(0x42);
    }
    if set(ExtHeader::Deth) {
        t.deth = Some(DethRepr {
            qkey: 0x1111_1111,
            src_qp: QPN_A,
        });
    }
    if set(ExtHeader::Xrceth) {
        t.xrceth = Some(0x77);
    }
    if set(ExtHeader::Feth) {
        t.feth = Some(0x11); // selectivity 1, placement type 1 (global visibility)
    }
    if set(ExtHeader::Reth) {
        t.reth = Some(RethRepr {
            va: 0x7f12_3456_7000,
            rkey: 0x0000_091e,
            dma_len: payload_len as u32,
        });
    }
    if set(ExtHeader::AtomicEth) {
        t.atomic_eth = Some(AtomicEthRepr {
            va: 0x7f12_3456_8000,
            rkey: 0x0000_091e,
            swap_add: 0x1122_3344_5566_7788,
            compare: 0x0102_0304_0506_0708,
        });
    }
    if set(ExtHeader::Aeth) {
        t.aeth = Some(AethRepr {
            syndrome: Syndrome::Ack { credits: 31 },
            msn: 7,
        });
    }
    if set(ExtHeader::AtomicAckEth) {
        t.atomic_ack = Some(0x0102_0304_0506_0708);
    }
    if set(ExtHeader::ImmDt) {
        t.imm = Some(0xdead_beef);
    }
    if set(ExtHeader::Ieth) {
        t.ieth = Some(0x0000_1234);
    }
    t
}

/// AckReq as rxe sets it: on the last packet of a reliable request.
fn wants_ack(op: Opcode) -> bool {
    op.info().is_some_and(|i| {
        matches!(i.transport, Transport::Rc | Transport::Rd | Transport::Xrc)
            && !i.response
            && !i.operation.contains("FIRST")
            && !i.operation.contains("MIDDLE")
    })
}

fn ethernet(vlan: Option<VlanTag>) -> Option<EthernetRepr> {
    Some(EthernetRepr {
        dst: MAC_B,
        src: MAC_A,
        vlan,
        ethertype: 0,
    })
}

fn v2_ipv4(t: TransportRepr, ident: u16) -> RoceRepr {
    let sport = source_port_from_flow_label(flow_label_from_qpns(QPN_A, QPN_B));
    let mut r = RoceRepr::v2_ipv4(
        Ipv4Addr::new(127, 0, 0, 1),
        Ipv4Addr::new(127, 0, 0, 2),
        ident,
        sport,
        t,
    );
    r.ethernet = ethernet(None);
    r.fill_lengths();
    r
}

fn v2_ipv6(t: TransportRepr) -> RoceRepr {
    let fl = flow_label_from_qpns(QPN_A, QPN_B);
    let mut r = RoceRepr::v2_ipv6(
        Ipv6Addr::LOCALHOST,
        Ipv6Addr::LOCALHOST,
        0,
        source_port_from_flow_label(fl),
        t,
    );
    r.ethernet = ethernet(None);
    r.fill_lengths();
    r
}

fn v1(t: TransportRepr) -> RoceRepr {
    let mut r = RoceRepr {
        ethernet: ethernet(None),
        network: Network::V1 {
            grh: Ipv6Repr {
                traffic_class: 0,
                flow_label: 0,
                payload_len: 0,
                next_header: crate::ipv6::NEXT_HEADER_IBA,
                hop_limit: 1,
                src: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0xff, 0xfe00, 0x0a),
                dst: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0xff, 0xfe00, 0x0b),
            },
        },
        transport: t,
    };
    r.fill_lengths();
    r
}

fn sample(description: String, repr: RoceRepr, payload: Vec<u8>) -> Sample {
    Sample {
        description,
        repr,
        payload,
    }
}

/// The whole sample set, in a fixed order.
pub fn all() -> Vec<Sample> {
    let mut out = Vec::new();
    // PSNs start just below 2^24 so that they wrap within the set.
    for (i, op) in Opcode::all().enumerate() {
        let psn = 0x00ff_fffa + i as u32;
        let len = [0, 1, 2, 3, 13, 256, 1024][i % 7];
        let t = transport(op, psn, len);
        let body = payload(t.payload_len, i as u8);
        let name = op.to_string();
        out.push(sample(
            format!("v2-ipv4 {name} payload={}", t.payload_len),
            v2_ipv4(t, 0x4000 + i as u16),
            body,
        ));
    }
    let some = [
        Opcode::RC_SEND_ONLY,
        Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        Opcode::RC_RDMA_READ_REQUEST,
        Opcode::RC_ACKNOWLEDGE,
        Opcode::RC_ATOMIC_ACKNOWLEDGE,
        Opcode::RC_COMPARE_SWAP,
        Opcode::UD_SEND_ONLY_WITH_IMMEDIATE,
        Opcode::RC_SEND_ONLY_WITH_INVALIDATE,
    ];
    for op in some {
        let t = transport(op, 100, 61);
        let body = payload(t.payload_len, 9);
        out.push(sample(format!("v2-ipv6 {op}"), v2_ipv6(t), body.clone()));
        out.push(sample(format!("v1 {op}"), v1(t), body));
    }
    // A NAK, an RNR NAK, an ECN-marked (CE) WRITE with FECN, a tagged frame.
    let mut nak = transport(Opcode::RC_ACKNOWLEDGE, 200, 0);
    nak.aeth = Some(AethRepr {
        syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
        msn: 9,
    });
    out.push(sample(
        "v2-ipv4 NAK PSN sequence error".into(),
        v2_ipv4(nak, 1),
        vec![],
    ));
    let mut rnr = nak;
    rnr.aeth = Some(AethRepr {
        syndrome: Syndrome::RnrNak { timer: 14 },
        msn: 9,
    });
    out.push(sample(
        "v2-ipv4 RNR NAK 1.28 ms".into(),
        v2_ipv4(rnr, 2),
        vec![],
    ));
    let mut ce = transport(Opcode::RC_RDMA_WRITE_MIDDLE, 300, 1024);
    ce.bth.fecn = true;
    let mut ce_repr = v2_ipv4(ce, 3);
    if let Network::V2Ipv4 { ip, .. } = &mut ce_repr.network {
        ip.ecn = 3;
        ip.dscp = 26;
    }
    ce_repr.fill_lengths();
    out.push(sample(
        "v2-ipv4 ECN CE, FECN".into(),
        ce_repr,
        payload(1024, 3),
    ));
    let mut tagged = v2_ipv4(transport(Opcode::RC_SEND_ONLY, 400, 64), 4);
    tagged.ethernet = ethernet(Some(VlanTag {
        pcp: 3,
        dei: false,
        vid: 100,
    }));
    tagged.fill_lengths();
    out.push(sample(
        "v2-ipv4 802.1Q PCP 3".into(),
        tagged,
        payload(64, 4),
    ));
    out.extend(multicast());
    out.push(cm_req());
    out
}

/// A UD SEND to a multicast group, as RoCE v2 carries one: DQPN 0xFFFFFF,
/// to an IPv4 group (Ethernet 01:00:5e + its low 23 bits) and to an IPv6
/// group (33:33 + its low 32 bits).
fn multicast() -> [Sample; 2] {
    let mut t = transport(Opcode::UD_SEND_ONLY, 500, 40);
    t.bth.dest_qp = 0xff_ffff;
    let group4 = Ipv4Addr::new(239, 255, 79, 2);
    let mut v4 = RoceRepr::v2_ipv4(Ipv4Addr::new(127, 0, 0, 1), group4, 5, 0xc0de, t);
    v4.ethernet = Some(EthernetRepr {
        dst: [0x01, 0x00, 0x5e, 0x7f, 79, 2],
        ..ethernet(None).expect("an Ethernet header")
    });
    v4.fill_lengths();
    let group6 = Ipv6Addr::new(0xff0e, 0, 0, 0, 0, 0, 0, 0x4f02);
    let mut v6 = RoceRepr::v2_ipv6(Ipv6Addr::LOCALHOST, group6, 0, 0xc0de, t);
    v6.ethernet = Some(EthernetRepr {
        dst: [0x33, 0x33, 0, 0, 0x4f, 0x02],
        ..ethernet(None).expect("an Ethernet header")
    });
    v6.fill_lengths();
    [
        sample(
            "v2-ipv4 UD multicast to 239.255.79.2".into(),
            v4,
            payload(40, 5),
        ),
        sample(
            "v2-ipv6 UD multicast to ff0e::4f02".into(),
            v6,
            payload(40, 6),
        ),
    ]
}

/// A CM REQ on QP1 as rdma_cm sends it (IP CM service, TCP port 7174).
fn cm_req() -> Sample {
    let mut t = transport(Opcode::UD_SEND_ONLY, 8, mad::MAD_LEN);
    t.bth.dest_qp = 1;
    t.deth = Some(DethRepr {
        qkey: mad::GSI_QKEY,
        src_qp: 1,
    });
    let gid = |last: u8| {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&[127, 0, 0, last]);
        g
    };
    let path = CmPath {
        local_port_lid: 0xffff,
        remote_port_lid: 0xffff,
        local_port_gid: gid(1),
        remote_port_gid: gid(2),
        flow_label: 0,
        packet_rate: 0,
        traffic_class: 0,
        hop_limit: 64,
        sl: 0,
        subnet_local: false,
        local_ack_timeout: 19,
    };
    let mut private_data = [0u8; 92];
    // rdma_cm IP header: version 0, IPv4, source port 50292, addresses.
    private_data[1] = 0x40;
    private_data[2..4].copy_from_slice(&50292u16.to_be_bytes());
    private_data[16..20].copy_from_slice(&[127, 0, 0, 1]);
    private_data[32..36].copy_from_slice(&[127, 0, 0, 2]);
    let req = CmReq {
        local_comm_id: 0x64ba_f67c,
        service_id: 0x0106_1c06,
        local_ca_guid: 0x0200_00ff_fe00_000a,
        local_qkey: 0,
        local_qpn: QPN_A,
        responder_resources: 1,
        local_eecn: 0,
        initiator_depth: 1,
        remote_eecn: 0,
        remote_cm_response_timeout: 20,
        transport_service_type: 0,
        end_to_end_flow_control: false,
        starting_psn: Psn::new(0x2c_3616),
        local_cm_response_timeout: 20,
        retry_count: 7,
        partition_key: 0xffff,
        path_packet_mtu: 3,
        rdc_exists: false,
        rnr_retry_count: 7,
        max_cm_retries: 15,
        srq: false,
        extended_transport_type: 0,
        primary_path: path,
        alternate_path: CmPath {
            local_port_gid: [0; 16],
            remote_port_gid: [0; 16],
            local_port_lid: 0,
            remote_port_lid: 0,
            hop_limit: 0,
            local_ack_timeout: 0,
            ..path
        },
        sap_supported: false,
        private_data,
    };
    let m = Mad {
        header: MadHeader {
            base_version: mad::BASE_VERSION,
            mgmt_class: mad::CM_CLASS,
            class_version: mad::CM_CLASS_VERSION,
            method: mad::method::SEND,
            status: 0,
            class_specific: 0,
            transaction_id: 0x2_7cf6_ba64,
            attribute_id: mad::attr::REQ,
            attribute_modifier: 0,
        },
        cm: Some(CmMessage::Req(req)),
    };
    let mut mad_bytes = vec![0u8; mad::MAD_LEN];
    // Fixed, valid values: emit cannot fail (the tests parse it back).
    let _ = m.emit(&mut mad_bytes);
    sample("v2-ipv4 CM REQ to QP1".into(), v2_ipv4(t, 5), mad_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LinkType, locate};

    #[test]
    fn every_sample_parses_back_with_a_good_icrc() {
        let all = all();
        assert!(all.len() > 100);
        for s in &all {
            let bytes = s.to_bytes();
            assert!(!bytes.is_empty(), "{}", s.description);
            let f = locate(LinkType::Ethernet, &bytes)
                .expect("RoCE")
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", s.description));
            assert!(f.icrc_ok(), "{}", s.description);
            assert_eq!(RoceRepr::parse(&f).unwrap(), s.repr, "{}", s.description);
        }
        let req = all.last().unwrap();
        let mad = Mad::parse(&req.payload).unwrap();
        let Some(CmMessage::Req(r)) = mad.cm else {
            panic!("not a REQ")
        };
        let ip = r.ip_cm().expect("IP CM private data");
        assert_eq!(ip.source_port, 50292);
        assert_eq!(ip.destination_port, 7174);
    }
}

/// The five CM MADs of a real rdma_cm connection: `rping` between two
/// kernel Soft-RoCE hosts (client 198.18.0.12, server 198.18.0.11), packets
/// 1, 2, 3, 64 and 65 of `shared/vectors/rxe/rping.pcap`, as hex: the UD
/// SEND ONLY payload after the DETH, trailing zero bytes omitted. The MAD
/// parser's tests and the connection manager's kernel comparison share them.
pub mod rping {
    /// Packet 1, client -> server.
    pub const REQ: &str = concat!(
        "0107020300000000000000027cf6ba64001000000000000064baf67c00000000",
        "0000000001061c06505400fffe52000b000000000000000000001e0100000001",
        "000000a0214660a7ffff37f0ffffffff00000000000000000000ffffc612000c",
        "00000000000000000000ffffc612000b7e612000004000980000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000000",
        "000000000040c474000000000000000000000000c612000c0000000000000000",
        "00000000c612000b",
    );
    /// Packet 2, server -> client.
    pub const REP: &str = concat!(
        "0107020300000000000000027cf6ba6400130000000000001ebbc7be64baf67c",
        "0000000000001e0000000000d7977600010178e0505400fffe52000a",
    );
    /// Packet 3, client -> server.
    pub const RTU: &str = "0107020300000000000000027cf6ba64001400000000000064baf67c1ebbc7be";
    /// Packet 64, client -> server.
    pub const DREQ: &str = concat!(
        "0107020300000000000000027cf6ba64001500000000000064baf67c1ebbc7be",
        "00001e",
    );
    /// Packet 65, server -> client.
    pub const DREP: &str = "0107020300000000000000027cf6ba6400160000000000001ebbc7be64baf67c";
}
