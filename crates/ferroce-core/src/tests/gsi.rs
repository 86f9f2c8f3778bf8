//! QP1, the GSI QP: MADs between endpoints, drops by cause, the queue
//! bound, QPN 1 out of the application's reach, and the kernel's own CM
//! MADs (from `shared/vectors/rxe/rping.pcap`) taken byte for byte.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ferroce_wire::roce::{LinkType, Network, locate};
use ferroce_wire::{Opcode, Psn};

use super::util::{Pair, craft, emit, parse, recv_wr, send_wr};
use crate::verbs::{QpAttr, QpState, SendOp, VerbsError};
use crate::{GSI_QKEY, GSI_QPN, MAD_LEN, MAX_QUEUED_MADS, MadStats};

/// A MAD-sized payload whose bytes say which one it is.
fn mad(tag: u8) -> Vec<u8> {
    (0..MAD_LEN)
        .map(|i| (i as u8).wrapping_mul(7) ^ tag)
        .collect()
}

/// A UD SEND_ONLY to QP1 as a peer would build it.
fn mad_packet(op: Opcode, qkey: u32, payload: &[u8]) -> Vec<u8> {
    let mut t = craft(op, Psn::new(9), GSI_QPN, payload.len());
    if let Some(d) = t.deth.as_mut() {
        d.qkey = qkey;
        d.src_qp = GSI_QPN;
    }
    emit(&t, payload)
}

#[test]
fn a_mad_goes_from_one_endpoints_qp1_to_the_others() {
    let mut p = Pair::new(1);
    let to = p.addrs[1];
    p.eps[0].send_mad(to, GSI_QPN, &mad(1)).unwrap();
    p.eps[0].send_mad(to, GSI_QPN, &mad(2)).unwrap();
    let sent = p.take_transmits(0);
    assert_eq!(sent.len(), 2);
    let t = parse(&sent[0]);
    assert_eq!(t.bth.opcode, Opcode::UD_SEND_ONLY);
    assert_eq!(t.bth.dest_qp, GSI_QPN);
    assert_eq!(t.bth.pkey, 0xffff);
    let deth = t.deth.unwrap();
    assert_eq!((deth.qkey, deth.src_qp), (GSI_QKEY, GSI_QPN));
    assert_eq!(parse(&sent[1]).bth.psn, t.bth.psn + 1, "a PSN per MAD");
    for d in &sent {
        p.deliver(1, d);
    }
    for tag in [1, 2] {
        let m = p.eps[1].poll_mad().expect("the MAD arrived");
        assert_eq!(m.from, p.addrs[0]);
        assert_eq!((m.src_qp, m.pkey_index), (GSI_QPN, 0));
        assert_eq!(&m.data[..], &mad(tag)[..]);
    }
    assert!(p.eps[1].poll_mad().is_none());
    assert_eq!(p.eps[0].mad_stats().tx_mads, 2);
    assert_eq!(p.eps[1].mad_stats().rx_mads, 2);
}

#[test]
fn qp1_packets_leave_from_rxes_qp1_source_port() {
    let mut p = Pair::new(2);
    p.eps[0].send_mad(p.addrs[1], GSI_QPN, &mad(0)).unwrap();
    let t = p.eps[0].poll_transmit(p.now).unwrap();
    assert_eq!(t.path.udp_src_port, 55410, "rxe's hash_32(1, 14) + 0xC000");
    assert_eq!((t.path.hop_limit, t.path.traffic_class), (64, 0));
}

/// Which [`MadStats`] counter a case expects to go up.
type Counter = fn(&MadStats) -> u64;

#[test]
fn packets_that_are_not_mads_are_dropped_by_cause() {
    let mut p = Pair::new(3);
    let cases: [(Vec<u8>, Counter); 5] = [
        (
            mad_packet(Opcode::UD_SEND_ONLY, 0x1111_1111, &mad(0)),
            |s| s.rx_bad_qkey,
        ),
        (
            mad_packet(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, GSI_QKEY, &mad(0)),
            |s| s.rx_bad_opcode,
        ),
        (
            emit(
                &craft(Opcode::RC_SEND_ONLY, Psn::new(0), GSI_QPN, 4),
                &[0; 4],
            ),
            |s| s.rx_bad_opcode,
        ),
        (mad_packet(Opcode::UD_SEND_ONLY, GSI_QKEY, &[0; 100]), |s| {
            s.rx_bad_length
        }),
        (mad_packet(Opcode::UD_SEND_ONLY, GSI_QKEY, &[0; 260]), |s| {
            s.rx_bad_length
        }),
    ];
    for (packet, counter) in cases {
        let before = counter(&p.eps[1].mad_stats());
        p.deliver(1, &packet);
        assert_eq!(counter(&p.eps[1].mad_stats()), before + 1);
    }
    // Another partition.
    let mut t = craft(Opcode::UD_SEND_ONLY, Psn::new(0), GSI_QPN, MAD_LEN);
    t.bth.pkey = 0x8001;
    t.deth.as_mut().unwrap().qkey = GSI_QKEY;
    p.deliver(1, &emit(&t, &mad(0)));
    let s = p.eps[1].mad_stats();
    assert_eq!(s.rx_bad_pkey, 1);
    assert_eq!(s.rx_mads, 0);
    assert!(p.eps[1].poll_mad().is_none());
    // The same MAD done right is taken.
    p.deliver(1, &mad_packet(Opcode::UD_SEND_ONLY, GSI_QKEY, &mad(0)));
    assert!(p.eps[1].poll_mad().is_some());
}

#[test]
fn the_receive_queue_keeps_the_newest_mads_and_counts_the_rest() {
    let mut p = Pair::new(4);
    let extra = 10;
    for i in 0..MAX_QUEUED_MADS + extra {
        p.deliver(
            1,
            &mad_packet(Opcode::UD_SEND_ONLY, GSI_QKEY, &mad(i as u8)),
        );
    }
    let s = p.eps[1].mad_stats();
    assert_eq!(s.rx_overflow, extra as u64);
    let got: Vec<_> = std::iter::from_fn(|| p.eps[1].poll_mad()).collect();
    assert_eq!(got.len(), MAX_QUEUED_MADS);
    assert_eq!(&got[0].data[..], &mad(extra as u8)[..], "the oldest went");
}

#[test]
fn send_mad_refuses_what_is_not_a_mad_and_a_full_queue() {
    let mut p = Pair::new(5);
    let to = p.addrs[1];
    let e = p.eps[0].send_mad(to, GSI_QPN, &[0; 255]).unwrap_err();
    assert!(matches!(e, VerbsError::BadValue { value: 255, .. }), "{e}");
    let e = p.eps[0].send_mad(to, 1 << 24, &mad(0)).unwrap_err();
    assert!(matches!(e, VerbsError::BadValue { .. }), "{e}");
    for _ in 0..MAX_QUEUED_MADS {
        p.eps[0].send_mad(to, GSI_QPN, &mad(0)).unwrap();
    }
    let e = p.eps[0].send_mad(to, GSI_QPN, &mad(0)).unwrap_err();
    assert!(matches!(e, VerbsError::QueueFull { qpn: 1, .. }), "{e}");
    assert_eq!(p.take_transmits(0).len(), MAX_QUEUED_MADS);
    p.eps[0].send_mad(to, GSI_QPN, &mad(0)).unwrap();
}

#[test]
fn the_application_cannot_reach_qpn_1() {
    let mut p = Pair::new(6);
    let ep = &mut p.eps[0];
    let attr = QpAttr {
        state: Some(QpState::Err),
        ..QpAttr::default()
    };
    assert_eq!(ep.modify_qp(GSI_QPN, &attr), Err(VerbsError::NoSuchQp(1)));
    assert_eq!(ep.destroy_qp(GSI_QPN), Err(VerbsError::NoSuchQp(1)));
    assert_eq!(ep.qp_state(GSI_QPN), Err(VerbsError::NoSuchQp(1)));
    let send = send_wr(1, SendOp::Send, &[]);
    assert_eq!(ep.post_send(GSI_QPN, send), Err(VerbsError::NoSuchQp(1)));
    let recv = recv_wr(1, &[]);
    assert_eq!(ep.post_recv(GSI_QPN, recv), Err(VerbsError::NoSuchQp(1)));
    let msg = VerbsError::NoSuchQp(1).to_string();
    assert!(msg.contains("GSI") && msg.contains("send_mad"), "{msg}");
    // QP1 still works after the refusals.
    assert!(ep.accepts(p.addrs[1], GSI_QPN), "any source may send MADs");
    p.deliver(0, &mad_packet(Opcode::UD_SEND_ONLY, GSI_QKEY, &mad(3)));
    assert_eq!(&p.eps[0].poll_mad().unwrap().data[..], &mad(3)[..]);
}

/// `../shared` beside the repository, or `FERROCE_SHARED`.
fn shared() -> PathBuf {
    let dir = std::env::var_os("FERROCE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    assert!(
        dir.join("vectors").is_dir(),
        "no shared vectors at {} (set FERROCE_SHARED)",
        dir.display()
    );
    dir
}

#[test]
fn rxes_own_cm_mads_are_taken_byte_for_byte() {
    let path = shared().join("vectors/rxe/rping.pcap");
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = pcap_file::pcap::PcapReader::new(file).expect("a pcap file");
    let mut p = Pair::new(7);
    let mut seen = 0;
    while let Some(packet) = reader.next_packet() {
        let packet = packet.expect("a pcap record");
        let Some(roce) = locate(LinkType::Ethernet, &packet.data).and_then(|l| l.parse().ok())
        else {
            continue;
        };
        if roce.transport.bth().dest_qp() != GSI_QPN {
            continue;
        }
        let Network::V2Ipv4 { ip, udp } = roce.network else {
            panic!("rping.pcap is RoCE v2 over IPv4");
        };
        assert_eq!(udp.src_port, 55410, "rxe's QP1 source port");
        let from = IpAddr::V4(ip.src);
        p.eps[1].handle_datagram(p.now, from, roce.transport.as_bytes());
        let m = p.eps[1].poll_mad().expect("rxe's MAD is taken");
        assert_eq!(m.from, from);
        assert_eq!(m.src_qp, GSI_QPN);
        assert_eq!(&m.data[..], roce.transport.payload(), "byte for byte");
        // What ferroce sends for the same MAD has rxe's headers too.
        p.eps[0]
            .send_mad(from, GSI_QPN, roce.transport.payload())
            .unwrap();
        let ours = p.eps[0].poll_transmit(p.now).unwrap();
        let (ours, theirs) = (parse(&ours.data), parse(roce.transport.as_bytes()));
        assert_eq!(ours.bth.ack_req, theirs.bth.ack_req, "AckReq as rxe");
        assert_eq!((ours.bth.pkey, ours.deth), (theirs.bth.pkey, theirs.deth));
        assert_eq!(ours.bth.opcode, theirs.bth.opcode);
        seen += 1;
    }
    assert_eq!(seen, 5, "rping.pcap holds a REQ, REP, RTU, DREQ and DREP");
    assert_eq!(p.eps[1].mad_stats().rx_mads, 5);
}
