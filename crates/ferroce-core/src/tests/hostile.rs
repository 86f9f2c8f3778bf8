//! Hostile input: malformed bytes, and well-formed packets to unknown QPs,
//! to QPs in the wrong state, from the wrong address, of the wrong
//! transport, with the wrong Q_Key, or answering nothing, are dropped and
//! counted, never acted on (random packets are in `fuzz`).

use std::net::{IpAddr, Ipv4Addr};

use ferroce_wire::aeth::{AethRepr, NakCode, Syndrome};
use ferroce_wire::deth::DethRepr;
use ferroce_wire::reth::RethRepr;
use ferroce_wire::{Opcode, Psn};

use super::util::{
    Opts, Pair, Side, connect, connect_with, craft, emit, pattern, recv_wr, rmem, send_wr, sge,
};
use super::{read_mr, write_mr};
use crate::verbs::{Access, Mtu, QpAttr, QpState, QpType, SendOp, WcStatus};
use crate::{QpInit, Stats};

pub(super) const STRANGER: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 99));

/// The drop counters that moved from `before` to `after`, by name.
fn moved(before: Stats, after: Stats) -> Vec<(&'static str, u64)> {
    let f = |s: Stats| {
        [
            ("rx_malformed", s.rx_malformed),
            ("rx_unknown_qp", s.rx_unknown_qp),
            ("rx_wrong_state", s.rx_wrong_state),
            ("rx_wrong_source", s.rx_wrong_source),
            ("rx_bad_qkey", s.rx_bad_qkey),
            ("rx_bad_pkey", s.rx_bad_pkey),
            ("rx_duplicate", s.rx_duplicate),
            ("rx_out_of_sequence", s.rx_out_of_sequence),
            ("rx_unexpected", s.rx_unexpected),
            ("tx_packets", s.tx_packets),
            ("rnr_naks_sent", s.rnr_naks_sent),
            ("rx_bad_cnp", s.rx_bad_cnp),
            ("cnps_received", s.cnps_received),
        ]
    };
    f(after)
        .into_iter()
        .zip(f(before))
        .filter(|((_, a), (_, b))| a != b)
        .map(|((name, a), (_, b))| (name, a - b))
        .collect()
}

/// A WRITE of 8 bytes into `b`'s region at `b`'s expected PSN: harmful if
/// it were executed.
fn write_into(p: &Pair, b: &Side, dest: u32) -> Vec<u8> {
    let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
    let mut t = craft(Opcode::RC_RDMA_WRITE_ONLY, epsn, dest, 8);
    t.reth = Some(RethRepr {
        va: b.mr.addr,
        rkey: b.mr.rkey,
        dma_len: 8,
    });
    emit(&t, &[0xee; 8])
}

/// Creates on endpoint 1 a QP of `qp_type` brought to `state` (Reset, Init
/// or RTR, connected to nothing), for packets to find in the wrong state.
fn idle_qp(p: &mut Pair, qp_type: QpType, state: QpState) -> u32 {
    let e = &mut p.eps[1];
    let pd = e.alloc_pd();
    let cq = e.create_cq(16).unwrap();
    let init = QpInit {
        pd,
        qp_type,
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: 4,
        max_recv_wr: 4,
        sq_sig_all: false,
        srq: None,
    };
    let q = e.create_qp(init).unwrap();
    let ud = qp_type == QpType::Ud;
    if state != QpState::Reset {
        let attr = QpAttr {
            state: Some(QpState::Init),
            pkey_index: Some(0),
            port: Some(1),
            access: (!ud).then_some(Access::LOCAL_WRITE | Access::REMOTE_WRITE),
            qkey: ud.then_some(0x1111_1111),
            ..QpAttr::default()
        };
        e.modify_qp(q, &attr).unwrap();
    }
    if state == QpState::Rtr {
        let path = crate::verbs::Path {
            remote: p.addrs[0],
            udp_src_port: 0xc000,
            traffic_class: 0,
            hop_limit: 64,
            roce: crate::verbs::RoceMode::V2,
        };
        let rtr = QpAttr {
            state: Some(QpState::Rtr),
            path: (!ud).then_some(path),
            path_mtu: (!ud).then_some(Mtu::Mtu1024),
            dest_qpn: (!ud).then_some(0x77),
            rq_psn: (!ud).then_some(Psn::new(0)),
            max_dest_rd_atomic: (!ud).then_some(1),
            min_rnr_timer: (!ud).then_some(1),
            ..QpAttr::default()
        };
        p.eps[1].modify_qp(q, &rtr).unwrap();
    }
    let e = &mut p.eps[1];
    if ud {
        let mr = e.reg_mr(pd, 4096, Access::LOCAL_WRITE).unwrap();
        let sg = vec![crate::verbs::Sge {
            lkey: mr.lkey,
            offset: 0,
            len: 4096,
        }];
        e.post_recv(q, recv_wr(1, &sg)).unwrap();
    }
    q
}

#[test]
fn stray_packets_are_dropped_and_counted() {
    let mut p = Pair::new(300);
    let [a, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let reset = idle_qp(&mut p, QpType::Rc, QpState::Reset);
    let init = idle_qp(&mut p, QpType::Rc, QpState::Init);
    let rtr = idle_qp(&mut p, QpType::Rc, QpState::Rtr);
    let ud = idle_qp(&mut p, QpType::Ud, QpState::Rtr);
    let peer = p.addrs[0];
    let good = write_into(&p, &b, b.qpn);
    let mut bad_tver = good.clone();
    bad_tver[1] |= 0x01;
    let mut unknown_opcode = good.clone();
    unknown_opcode[0] = 0x1f;
    let epsn = p.eps[1].qps[&b.qpn].resp.epsn;
    let other = |op, dest, len| emit(&craft(op, epsn, dest, len), &vec![0; len]);
    let mut bad_qkey = craft(Opcode::UD_SEND_ONLY, Psn::new(0), ud, 4);
    bad_qkey.deth = Some(DethRepr {
        qkey: 0x2222_2222,
        src_qp: a.qpn,
    });
    // A CNP without its 16 reserved bytes.
    let mut short_cnp = other(Opcode::CNP, b.qpn, 0);
    short_cnp.truncate(12 + 4);
    let cases: Vec<(&str, IpAddr, Vec<u8>, &str)> = vec![
        ("empty", peer, Vec::new(), "rx_malformed"),
        ("shorter than a BTH", peer, vec![0; 11], "rx_malformed"),
        (
            "cut inside the RETH",
            peer,
            good[..20].to_vec(),
            "rx_malformed",
        ),
        ("TVer 1", peer, bad_tver, "rx_malformed"),
        ("unknown opcode", peer, unknown_opcode, "rx_malformed"),
        (
            "unknown QP",
            peer,
            write_into(&p, &b, 0x99),
            "rx_unknown_qp",
        ),
        (
            "QP in Reset",
            peer,
            write_into(&p, &b, reset),
            "rx_wrong_state",
        ),
        (
            "QP in Init",
            peer,
            write_into(&p, &b, init),
            "rx_wrong_state",
        ),
        (
            "ACK to a QP in RTR",
            peer,
            other(Opcode::RC_ACKNOWLEDGE, rtr, 0),
            "rx_wrong_state",
        ),
        (
            "ACK to a UD QP",
            peer,
            other(Opcode::RC_ACKNOWLEDGE, ud, 0),
            "rx_unexpected",
        ),
        ("stranger", STRANGER, good.clone(), "rx_wrong_source"),
        (
            "UC opcode",
            peer,
            other(Opcode::UC_RDMA_WRITE_ONLY, b.qpn, 8),
            "rx_unexpected",
        ),
        (
            "UD opcode",
            peer,
            other(Opcode::UD_SEND_ONLY, b.qpn, 8),
            "rx_unexpected",
        ),
        (
            "CNP to a UD QP",
            peer,
            other(Opcode::CNP, ud, 0),
            "rx_bad_cnp",
        ),
        (
            "CNP from a stranger",
            STRANGER,
            other(Opcode::CNP, b.qpn, 0),
            "rx_wrong_source",
        ),
        (
            "CNP to no QP",
            peer,
            other(Opcode::CNP, 0xab_cdef, 0),
            "rx_unknown_qp",
        ),
        ("CNP cut short", peer, short_cnp, "rx_malformed"),
        (
            "RC to a UD QP",
            peer,
            write_into(&p, &b, ud),
            "rx_unexpected",
        ),
        ("wrong Q_Key", peer, emit(&bad_qkey, &[1; 4]), "rx_bad_qkey"),
    ];
    for (what, from, data, counter) in cases {
        let before = p.eps[1].stats();
        p.eps[1].handle_datagram(p.now, from, &data);
        let after = p.eps[1].stats();
        assert_eq!(after.rx_packets, before.rx_packets + 1, "{what}");
        assert_eq!(moved(before, after), [(counter, 1)], "{what}");
        assert!(p.take_transmits(1).is_empty(), "{what}: answered");
    }
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 8), [0; 8]);
    assert_eq!(p.eps[1].qp_state(b.qpn).unwrap(), QpState::Rts);
    assert_eq!(p.eps[1].qp_state(rtr).unwrap(), QpState::Rtr);
    assert!(p.completions(1, b.cq).is_empty());
    // The same WRITE from the right place is executed.
    p.deliver(1, &good);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 8), [0xee; 8]);
}

/// Responses that answer no outstanding request, from the peer's address:
/// ACKs, NAKs of every kind, READ responses and atomic ACKs, for PSNs
/// already complete or never sent.
fn ghost_responses(p: &Pair, a: &Side) -> Vec<(String, Vec<u8>, &'static str)> {
    let next = p.eps[0].qps[&a.qpn].req.next_psn;
    let syndromes = [
        Syndrome::Ack { credits: 31 },
        Syndrome::RnrNak { timer: 1 },
        Syndrome::Nak(NakCode::PsnSequenceError),
        Syndrome::Nak(NakCode::InvalidRequest),
        Syndrome::Nak(NakCode::RemoteAccessError),
        Syndrome::Nak(NakCode::RemoteOperationalError),
    ];
    let mut out = Vec::new();
    for (psn, counter) in [(next - 1, "rx_duplicate"), (next + 3, "rx_unexpected")] {
        for s in syndromes {
            let mut t = craft(Opcode::RC_ACKNOWLEDGE, psn, a.qpn, 0);
            t.aeth = Some(AethRepr {
                syndrome: s,
                msn: 0,
            });
            out.push((format!("{s} at {psn}"), emit(&t, &[]), counter));
        }
        for op in [
            Opcode::RC_RDMA_READ_RESPONSE_ONLY,
            Opcode::RC_ATOMIC_ACKNOWLEDGE,
        ] {
            let len = if op == Opcode::RC_ATOMIC_ACKNOWLEDGE {
                0
            } else {
                8
            };
            let t = craft(op, psn, a.qpn, len);
            out.push((format!("{op} at {psn}"), emit(&t, &vec![7; len]), counter));
        }
    }
    out
}

#[test]
fn responses_to_nothing_outstanding_are_ignored() {
    let mut p = Pair::new(301);
    // rnr_retry 0: an RNR NAK acted on would fail the next request at once.
    let opts = Opts {
        rnr_retry: 0,
        ..Opts::new(QpType::Rc, 4096, Mtu::Mtu1024)
    };
    let [a, b] = connect_with(&mut p, opts);
    // Some traffic first, so that "already complete" means something.
    let write = SendOp::Write {
        remote: rmem(b.mr.addr, b.mr.rkey),
    };
    p.eps[0]
        .post_send(a.qpn, send_wr(1, write, &sge(&a, 0, 8)))
        .unwrap();
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
    for (what, data, counter) in ghost_responses(&p, &a) {
        let before = p.eps[0].stats();
        p.deliver(0, &data);
        assert_eq!(moved(before, p.eps[0].stats()), [(counter, 1)], "{what}");
        assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Rts, "{what}");
        assert!(p.completions(0, a.cq).is_empty(), "{what}");
        assert_eq!(p.eps[0].poll_timeout(), None, "{what}: armed a timer");
    }
    // While a request is outstanding, a NAK for a PSN it does not hold is
    // still ignored, and the request then completes.
    let ghosts = ghost_responses(&p, &a);
    write_mr(&mut p, 0, a.mr.lkey, 0, &pattern(64, 3));
    p.eps[0]
        .post_send(a.qpn, send_wr(2, write, &sge(&a, 0, 64)))
        .unwrap();
    let request = p.take_transmits(0);
    for (what, data, _) in ghosts {
        p.deliver(0, &data);
        assert_eq!(p.eps[0].qp_state(a.qpn).unwrap(), QpState::Rts, "{what}");
    }
    for r in request {
        p.deliver(1, &r);
    }
    assert_eq!(p.wait_cqes(0, a.cq, 1)[0].status, WcStatus::Success);
    assert_eq!(read_mr(&p, 1, b.mr.lkey, 0, 64), pattern(64, 3));
}

/// `accepts`, the I/O layer's filter before the ICRC, says yes exactly to
/// what `handle_datagram` would not drop for its QP, state or source.
#[test]
fn accepts_only_a_receiving_qp_from_its_peer() {
    let mut p = Pair::new(61);
    let [_, b] = connect(&mut p, QpType::Rc, 4096, Mtu::Mtu1024);
    let peer = p.addrs[0];
    assert!(p.eps[1].accepts(peer, b.qpn));
    assert!(!p.eps[1].accepts(STRANGER, b.qpn), "wrong source");
    assert!(!p.eps[1].accepts(peer, b.qpn + 0x1000), "no such QP");
    let init = idle_qp(&mut p, QpType::Rc, QpState::Init);
    assert!(!p.eps[1].accepts(peer, init), "not receiving yet");
    // UD takes any source.
    let ud = idle_qp(&mut p, QpType::Ud, QpState::Rtr);
    assert!(p.eps[1].accepts(STRANGER, ud));
    // `accepts_qp`, for a layer that has no source address yet: the QP
    // and its state only.
    assert!(p.eps[1].accepts_qp(b.qpn) && p.eps[1].accepts_qp(ud));
    assert!(p.eps[1].accepts_qp(crate::GSI_QPN));
    assert!(!p.eps[1].accepts_qp(b.qpn + 0x1000), "no such QP");
    assert!(!p.eps[1].accepts_qp(init), "not receiving yet");
}
